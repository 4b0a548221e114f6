"""Host side of the result record (declared in runner.worker.protocol's Record): a worker's
result.json read and checked once into its typed WorkerResult (or why it cannot be used), turned
into a stored record, its status decided in one place, with the figures the host adds to it (its
step times summarised, its throughput: never computed in a worker)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from ...executors.base import Outcome
from ...worker.protocol import WORKER_FIELDS, CellSpec, Status, WorkerResult, empty_result
from . import schemas
from .types import Document, Figure, Record, StepSummary, Throughput


@dataclass(frozen=True)
class Unusable:
    """A result.json that is not a valid worker result, and why."""

    problem: str


# What the host makes of an attempt's result.json: the worker's typed result, a file that is
# not a valid one, or None (no result: the worker died before writing it).
WorkerReply = WorkerResult | Unusable | None


def read_worker_result(path: Path, spec: CellSpec) -> WorkerReply:
    """An attempt's result.json, read once and checked once (worker_result)."""
    return worker_result(read_json_object(path), spec)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file (never through a symbolic link), else None."""
    from .store import read_file

    try:
        data = schemas.parse_json(read_file(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def worker_result(data: Mapping[str, Any] | None, spec: CellSpec) -> WorkerReply:
    """The one place a worker's result is checked: None for no result, Unusable for one that
    cannot be stored as it is, else the typed WorkerResult — the attempt's own spec fields
    (the host's coordinates, never the file's) with the worker's fields over them. The worker's
    own status is kept, except that "ok" needs finite positive samples (status_from_outcome)."""
    if data is None:
        return None
    problem = worker_problem(data)
    if problem is not None:
        return Unusable(problem)
    return cast(WorkerResult, {**empty_result(spec), **worker_fields(data, spec)})


def failed_result(spec: CellSpec, error: str) -> WorkerResult:
    """The result of a worker that never started (its environment could not be prepared)."""
    result = empty_result(spec)
    result["error"] = error
    return result


def worker_problem(worker: Mapping[str, Any]) -> str | None:
    """Why a worker's result.json cannot be stored as it is (None: it can)."""
    problem = schemas.problem_of(schemas.RecordModel, _worker_view(worker))
    if problem == "status 'ok' without finite positive samples_ms":
        return None                      # a verdict on the measurement, not on the file
    return problem


def _worker_view(worker: Mapping[str, Any]) -> dict[str, Any]:
    """The worker's fields over identity placeholders: only what the worker owns is checked."""
    placeholders = dict(cell_id="x", cell_name="x", repeat=1, environment="x", workload="x",
                        task="x", batch_size=1)
    return {**placeholders, **{k: v for k, v in worker.items() if k in WORKER_FIELDS}}


def status_from_outcome(outcome: Outcome, worker: WorkerReply) -> tuple[Status, str | None]:
    """The one place a process outcome becomes a status: (status, error text)."""
    tail = outcome.log_tail.strip()
    if outcome.timed_out:
        return "timeout", f"killed after the cell timeout ({outcome.wall_s:.0f} s)"
    if outcome.oom_killed:
        return "oom", "killed by the out-of-memory killer"
    if isinstance(worker, Unusable):
        return "crashed", f"the worker's result.json is not a valid result ({worker.problem})"
    if worker is not None:
        if worker["status"] == "ok" and not schemas.positive_samples(worker["samples_ms"]):
            return "failed", ("the worker said ok but gave no finite positive step times "
                              "(samples_ms); nothing was measured")
        if worker["status"] == "not_applicable":
            # What applies is the plan's to say (the catalog's rules), before a worker starts:
            # a worker's claim would show a failure as a planned NA.
            return "failed", ("the worker said not_applicable, but the plan runs this cell "
                              "(the catalog's rules decide what applies): "
                              f"{worker['error'] or 'no reason given'}")
        return worker["status"], worker["error"]
    if outcome.returncode is not None and outcome.returncode < 0:
        return "crashed", f"worker killed by signal {-outcome.returncode}; last output:\n{tail}"
    if outcome.returncode == 137:
        return "oom", "worker exited 137 (SIGKILL, usually the OOM killer); last output:\n" + tail
    return "crashed", f"worker exited {outcome.returncode} without a result; last output:\n{tail}"


class HostFields(TypedDict, total=False):
    """What the host sets on a record when it finishes it (RECORD_FIELDS' "host" fields, and
    the run id of a record it reuses)."""

    metadata: Document | None
    returncode: int | None
    wall_s: Figure | None
    log: str | None
    host_gpu: Any
    settle: Any
    usd: Figure | None
    run_id: str | None


def finish(fields: Mapping[str, Any], status: Status, error: str | None,
           host: HostFields | None = None, notes: Mapping[str, Any] | None = None,
           derive: bool = True) -> Record:
    """The one place a record is finished, whatever made it (a worker's outcome, a planned
    not_applicable, a calibration reused from the machine's cache): exactly RECORD_FIELDS from
    `fields` (the spec's and the worker's), its status and error, no samples unless they are
    finite and positive, what the host sets, `notes` added to its extra, then the figures the
    host derives from its samples (the step summary, the throughput). `derive` False: a record
    finished before, whose samples and figures are kept as they were stored."""
    record = schemas.record_of(fields)
    record["status"], record["error"] = status, error
    if derive and not schemas.positive_samples(record["samples_ms"]):
        record["samples_ms"] = []   # zeros or nothing: no measurement to summarise
    record.update(host or {})
    if notes:
        record["extra"] = {**(record["extra"] or {}), **notes}
    if derive:
        record.update(summarize(record["samples_ms"] or []))
        record.update(throughput(record))
    return record


def finalize(spec: CellSpec, outcome: Outcome, worker: WorkerReply,
             host_metadata: dict[str, Any], log: str, settle: Any = None,
             usd_per_s: float | None = None, notes: Mapping[str, Any] | None = None) -> Record:
    """A worker's outcome as its record: its result's fields (or the spec's and nulls), status,
    host fields and metadata; `usd_per_s` (the share of the VM's price the cell's GPUs make)
    makes its `usd`."""
    status, error = status_from_outcome(outcome, worker)
    fields = worker if isinstance(worker, dict) else empty_result(spec)
    wall = outcome.wall_s
    return finish(fields, status, error, HostFields(
        metadata={**(fields.get("metadata") or {}), **host_metadata},
        returncode=outcome.returncode, wall_s=wall, log=log, host_gpu=outcome.host_gpu,
        settle=settle, usd=wall * usd_per_s if usd_per_s is not None and wall is not None
        else None), notes)


def worker_fields(worker: Mapping[str, Any], spec: CellSpec) -> dict[str, Any]:
    """What a worker's result may set: its measurements, never the host's coordinates (cell id,
    repeat, environment, ...) or summaries. A calibration reports the size it kept in options."""
    fields = {k: v for k, v in worker.items() if k in WORKER_FIELDS}
    if spec.calibration_sizes and isinstance(worker.get("options"), dict):
        fields["options"] = worker["options"]
    return fields


def not_applicable_record(spec: CellSpec, reason: str) -> Record:
    return finish(empty_result(spec), "not_applicable", reason)


def reused_record(cached: Mapping[str, Any], run_id: str) -> Record:
    """A cached calibration record (the machine's peak cache: {record, run_id, cached_at}) as
    this run's: its fields and figures as stored, this run's id, where it came from in its
    `extra`."""
    stored = cached["record"]
    return finish(stored, stored["status"], stored.get("error"), HostFields(run_id=run_id),
                  notes={"peak_cache": {"run_id": cached.get("run_id"),
                                        "cached_at": cached.get("cached_at")}}, derive=False)


def summarize(samples_ms: list[float]) -> StepSummary:
    """median, mean, p10, p90, min, max and sample stdev of per-step times (ms)."""
    if not samples_ms:
        return StepSummary(median_ms=None, mean_ms=None, p10_ms=None, p90_ms=None, min_ms=None,
                           max_ms=None, stdev_ms=None)
    values = np.asarray(samples_ms, dtype=float)
    p10, median, p90 = np.percentile(values, [10, 50, 90])
    return StepSummary(
        median_ms=float(median),
        mean_ms=float(values.mean()),
        p10_ms=float(p10),
        p90_ms=float(p90),
        min_ms=float(values.min()),
        max_ms=float(values.max()),
        stdev_ms=float(values.std(ddof=1)) if len(values) > 1 else None,
    )


def throughput(record: Mapping[str, Any]) -> Throughput:
    """items/s and achieved TFLOP/s at the median step time."""
    median = record.get("median_ms")
    items, flops = record.get("items_per_step"), record.get("flops_per_step")
    if not median:
        return Throughput(items_per_s=None, achieved_tflops=None)
    return Throughput(
        items_per_s=items * 1000.0 / median if items else None,
        achieved_tflops=flops / (median / 1000.0) / 1e12 if flops else None,
    )
