"""Host side of the result record (fields defined in runner.worker.protocol.RECORD_FIELDS):
turn a worker outcome into a stored record, deciding the status in one place."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import stats
from ..worker.protocol import RECORD_FIELDS, SCHEMA_VERSION, STATUSES, CellSpec, empty_result


@dataclass
class Outcome:
    """What an executor saw of one worker process or container."""

    returncode: int | None
    timed_out: bool
    wall_s: float | None
    oom_killed: bool = False
    log_tail: str = ""
    host_gpu: dict[str, Any] | None = None  # docker cells: NVML figures sampled from the host


def read_worker_result(path: Path) -> dict[str, Any] | None:
    """The worker's result when present and well-formed, else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION \
            or data.get("status") not in STATUSES:
        return None
    return data


def status_from_outcome(outcome: Outcome, worker: dict[str, Any] | None) -> tuple[str, str | None]:
    """The one place a process outcome becomes a status: (status, error text)."""
    tail = outcome.log_tail.strip()
    if outcome.timed_out:
        return "timeout", f"killed after the cell timeout ({outcome.wall_s:.0f} s)"
    if outcome.oom_killed:
        return "oom", "killed by the out-of-memory killer"
    if worker is not None:
        return worker["status"], worker.get("error")
    if outcome.returncode is not None and outcome.returncode < 0:
        return "crashed", f"worker killed by signal {-outcome.returncode}; last output:\n{tail}"
    if outcome.returncode == 137:
        return "oom", "worker exited 137 (SIGKILL, usually the OOM killer); last output:\n" + tail
    return "crashed", f"worker exited {outcome.returncode} without a result; last output:\n{tail}"


def finalize(spec: CellSpec, outcome: Outcome, worker: dict[str, Any] | None,
             host_metadata: dict[str, Any], log: str) -> dict[str, Any]:
    """The stored record: worker fields (or nulls), status, host summaries and metadata."""
    record = empty_result(spec)
    if worker is not None:
        record.update({k: v for k, v in worker.items() if k in RECORD_FIELDS})
    record["status"], record["error"] = status_from_outcome(outcome, worker)
    record["metadata"] = {**(record.get("metadata") or {}), **host_metadata}
    record.update(returncode=outcome.returncode, wall_s=outcome.wall_s, log=log,
                  host_gpu=outcome.host_gpu)
    record.update(stats.summarize(record.get("samples_ms") or []))
    record.update(stats.throughput(record))
    return {k: record.get(k) for k in RECORD_FIELDS}


def not_applicable_record(spec: CellSpec, reason: str) -> dict[str, Any]:
    record = empty_result(spec)
    record.update(status="not_applicable", error=reason)
    record.update(stats.summarize([]))
    record.update(stats.throughput(record))
    return {k: record.get(k) for k in RECORD_FIELDS}
