"""Running cells: each planned cell × repeat on its lane, its record stored as it finishes; the
calibration before them; not-applicable cells recorded as such.

Every failure of a cell becomes a record with a status (results/data/records.py decides which);
only a lost executor (RunStopped), a nearly full disk or Ctrl-C stop the cells."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from rich.console import Console
from rich.progress import Progress

from .. import settings
from ..environments import LOCKS, Source, folder_flavour, lock_of
from ..errors import UsageError, user_text
from ..executors.base import Attempt, Executor, GpuRequest, Outcome, Prepared, write_spec
from ..machine import gpustate
from ..machine.peak_cache import PeakCache
from ..results.analysis import peaks
from ..results.data import records as record_mod
from ..results.data.store import Store
from ..results.data.types import Record
from ..schema.matrix import Cell
from ..schema.user_workloads import STAGED
from ..version import runner_version
from ..worker.protocol import COMPILE_CACHE_ENV, CellSpec, UserWorkloadEntry
from . import devices, scheduling
from .block_sizes import BlockSizes, HandedBlocks
from .console import calibration_line, calibration_summary, cell_line
from .displays import calibration_display
from .pace import Pace
from .plan import Entry, Plan
from .scheduling import Lane
from .setup import Setup

CALIBRATION_METHOD = ("dense matmul (A·B, n×n) at each size of calibration_sizes that fits the "
                      "device (a step predicted over 1 s is not timed) in every environment, "
                      "steps = auto with block samples, at least 3 s a size on a GPU, in two "
                      "passes: the first (which also warms the device) picks each environment's "
                      "size and the device's environment, the second measures the pick, so the "
                      "peak is not the largest of several noisy medians; its spread is that "
                      "window's p10–p90 (a measurement of this run, before its cells; never a "
                      "cell of the run, never a datasheet figure)")


class RunStopped(Exception):
    """An executor can run no more cells (its Docker engine or Ray cluster is gone): the run
    stops after the cell that found out (its record stored), keeping every finished record."""

    def __init__(self, reason: str, cell: str = "", record: Record | None = None,
                 by: str = "executor"):
        super().__init__(reason)
        self.reason, self.cell, self.record, self.by = reason, cell, record, by


def stop_if_lost(executor: Executor, cell: str = "", record: Record | None = None) -> None:
    if executor.lost:
        raise RunStopped(executor.lost, cell, record)


def cell_spec(cell: Cell, repeat: int, run_id: str, seed: int, result_path: str,
              calls_per_sample: int | None = None) -> CellSpec:
    """One attempt's spec: the cell's coordinates and axes, its settings as the cell carries
    them (whatever protocol.py declares), and what this attempt adds."""
    return CellSpec(
        run_id=run_id, cell_id=cell.id, cell_name=cell.name, repeat=repeat,
        environment=cell.environment, api=cell.api, backend=cell.backend, image=cell.image,
        workload=cell.workload, task=cell.task, batch_size=cell.batch_size, options=cell.options,
        steps=cell.steps, warmup_steps=cell.warmup_steps, seed=seed, result_path=result_path,
        calls_per_sample=calls_per_sample, user_workload=user_workload_entry(cell),
        tuning=dict(cell.tuning), **cell.axes, **cell.settings)


def user_workload_entry(cell: Cell) -> UserWorkloadEntry | None:
    """A user workload's spec entry, with how this cell runs it ("model" or "step")."""
    user = cell.user_workload
    if user is None:
        return None
    return {**user.spec_entry(), "runs_as": user.workload.runs_as(cell.api, cell.task)}


def run_cells(setup: Setup, plan: Plan, prepared: dict[str, Prepared], store: Store, seed: int,
              console: Console, pace: Pace | None = None,
              calls_per_sample: int | None = None,
              handed: HandedBlocks | None = None) -> None:
    """Every planned cell × repeat, on the run's lanes (one per GPU, or one at a time); with a
    pace, each line says [k/N] and the expected finish, each record its `usd`, and a cap
    (--budget, --max-hours) stops the run before a cell × repeat (RunStopped, by the cap).
    handed: another run's block sizes by cell name (--blocks-from)."""
    lanes = scheduling.Lanes(setup.lanes()[0], console)
    blocks = BlockSizes(store.records(), plan.to_run, calls_per_sample,
                        handed.sizes if handed else None)

    def run_one(entry: Entry, lane: Lane, show: Callable[[str], None]) -> Record:
        source = setup.source_of(entry.cell)
        executor = setup.executor_for(source)
        record = run_entry(executor, entry, prepared[source.key], store, seed,
                           lane=lane, stop=lanes.stop, on_status=show,
                           calls_per_sample=blocks.size(entry.cell),
                           usd_per_s=pace.usd_per_s(devices.width(setup, entry.cell))
                           if pace else None)
        stop_if_lost(executor, f"{entry.cell.name} r{entry.repeat}", record)
        return record

    def done(entry: Entry, record: Record, progress: Progress) -> None:
        blocks.finished(entry, record)
        progress.console.print(cell_line(entry, record, pace.finish(entry) if pace else ""),
                               soft_wrap=True)

    lanes.run(plan.to_run, cell_policy(setup, blocks, pace), run_one, done, setup.interrupt)
    if lanes.stopped is not None:
        raise RunStopped(lanes.stopped, by=pace.stopped_by if pace and pace.stopped_by
                         else "executor")


def cell_policy(setup: Setup, blocks: BlockSizes, pace: Pace | None) -> scheduling.Policy[Entry]:
    """Where and when each cell × repeat runs: a CPU cell alone (on a host with GPUs), a later
    repeat once its cell's first has finished (its block size), as many lanes as its devices,
    and, with a pace, no cell × repeat that would pass the run's caps."""
    return scheduling.Policy(label=lambda e: f"{e.cell.name} r{e.repeat}",
                             alone=lambda e: setup.alone(e.cell), ready=blocks.ready,
                             gate=pace.gate if pace else lambda entry: None,
                             width=lambda e: devices.width(setup, e.cell))


def run_calibration(setup: Setup, calibrations: list[Cell], prepared: dict[str, Prepared],
                    store: Store, seed: int, console: Console,
                    cache: PeakCache | None = None, recalibrate: bool = False,
                    usd_per_s: float | None = None) -> dict[str, Any] | None:
    """[run] calibrate: measure each device's peak per precision before the cells (kept in
    calibration/ and in the manifest; on --resume the stored ones are reused, and a peak the
    machine's cache holds for the same environment lock too, unless `recalibrate`)."""
    if not calibrations:
        return None
    sub = store.calibration()
    done = sub.finished()
    todo = [c for c in calibrations
            if Entry(c, 1).key not in done and setup.source_of(c).key in prepared]
    records: list[Record] = []
    started, measure = time.monotonic(), []
    for cell in todo:
        lock = source_identity(setup, setup.source_of(cell))
        cached = cache.get(lock, cell.id) if cache is not None and not recalibrate else None
        if cached is not None:
            sub.write_record(Entry(cell, 1).key, record_mod.reused_record(cached, store.run_id))
        else:
            measure.append((cell, lock))
    with calibration_display(console, len(measure)) as show:    # transient: one line when done
        for n, (cell, lock) in enumerate(measure, 1):
            show(n, f"{user_text(cell.environment)} {cell.axes.precision}")
            source = setup.source_of(cell)
            executor = setup.executor_for(source)
            record = run_entry(executor, Entry(cell, 1), prepared[source.key], sub, seed,
                               lane=setup.lanes()[0][0], usd_per_s=usd_per_s)
            records.append(record)
            if cache is not None:
                cache.put(lock, cell.id, dict(record), store.run_id)
            if record["status"] != "ok":
                console.print(calibration_line(cell, record))
            stop_if_lost(executor)
    reused = len(todo) - len(measure)
    if todo:
        console.print(calibration_summary(records, time.monotonic() - started, reused,
                                          cache.path if cache is not None else None),
                      soft_wrap=True)
    return {"method": CALIBRATION_METHOD, "peaks": peaks.peaks_from(sub.records()),
            **({"cache": {"path": str(cache.path), "reused": reused, "measured": len(records)}}
               if cache is not None else {})}


def source_identity(setup: Setup, source: Source) -> str | None:
    """What a cached peak is kept under: the hash of the lock an environment is built from, or
    the image reference (a digest); None for an existing interpreter (its packages can change)."""
    if source.by_digest:
        return source.reference
    if source.folder is None or setup.flavour.name not in LOCKS:
        return None                 # LOCKS lacks a Ray run's "node": each node picks its own
    lock = lock_of(source, folder_flavour(setup.flavour, source.folder))
    try:
        return "lock:" + hashlib.sha256(lock.read_bytes()).hexdigest()
    except OSError:
        return None


def record_not_applicable(store: Store, plan: Plan, run_id: str, seed: int) -> None:
    for cell in plan.not_applicable:
        key = f"{cell.id}-r1"
        if not store.record_path(key).exists():
            spec = cell_spec(cell, 1, run_id, seed, "")
            store.write_record(key, record_mod.not_applicable_record(spec, cell.not_applicable or ""))


def run_entry(executor: Executor, entry: Entry, prepared: Prepared, store: Store,
              seed: int, lane: Lane = scheduling.CPU_LANE, stop: threading.Event | None = None,
              on_status: Callable[[str], None] = lambda text: None,
              calls_per_sample: int | None = None, usd_per_s: float | None = None) -> Record:
    """Run one cell × repeat on its lane and store its record. When `stop` is set meanwhile
    (Ctrl-C in a parallel run) nothing is stored, as when a serial run is interrupted.
    calls_per_sample: the cell's block size handed over from its first repeat (BlockSizes);
    usd_per_s: the share of the VM's price the cell's GPUs make (the per-GPU share × its
    devices on a GPU), which makes the record's `usd`."""
    check_free_disk(store)
    placement = lane.placement()
    adopted = adopt_orphan(entry, store, seed, host_metadata(entry, prepared, {}))
    if adopted is not None:
        return adopted
    work = store.work_dir(entry.key)
    spec = cell_spec(entry.cell, entry.repeat, store.run_id, seed, str(work / "result.json"),
                     calls_per_sample)
    settled = None
    worker: record_mod.WorkerReply
    if prepared.error:
        outcome = Outcome(returncode=None, timed_out=False, wall_s=0.0)
        worker = record_mod.failed_result(spec, prepared.error)
    else:
        settled = settle_before(entry.cell, lane, on_status, stop)
        store.log_path(entry.key).unlink(missing_ok=True)
        attempt = attempt_for(entry, spec, work, store.log_path(entry.key), lane, placement,
                              on_status)
        if entry.cell.user_workload is not None:
            attempt.staged_code = store.root / STAGED
        write_spec(attempt)
        outcome = executor.run(prepared, attempt)
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt     # killed by the interrupt: no record, --resume reruns it
        worker = record_mod.read_worker_result(attempt.result_path, spec)
    record = record_mod.finalize(spec, outcome, worker, host_metadata(entry, prepared, placement),
                                 f"logs/{entry.key}.log", settle=settled, usd_per_s=usd_per_s)
    store.write_record(entry.key, record)
    return record


def attempt_for(entry: Entry, spec: CellSpec, work: Path, log_path: Path, lane: Lane,
                placement: dict[str, Any], on_status: Callable[[str], None]) -> Attempt:
    """The attempt an executor runs: the worker's variables from the matrix (and the backend,
    and kept compile caches), the cell's timeout, the GPU its lane gives it. `placement` is
    the record's: an executor that places the cell itself adds where it ran."""
    cell = entry.cell
    env = {**cell.env, **({"KERAS_BACKEND": cell.backend} if cell.backend else {}),
           **({COMPILE_CACHE_ENV: "kept"} if cell.keep_compile_caches else {})}
    return Attempt(spec=spec, work_dir=work, log_path=log_path, env=env, timeout=cell.timeout,
                   gpu=gpu_request(cell, lane), placement=placement, on_status=on_status)


def gpu_request(cell: Cell, lane: Lane) -> GpuRequest | None:
    """What the cell asks of the GPU on its lane: none for a CPU cell, else the lane's GPU (or
    the executor's default where the lane has none); a data-parallel cell, its lane's GPUs
    (a joined lane: Lanes gave it one per device)."""
    if cell.axes.device == "cpu":
        return None
    ids = [gpu.device_id for gpu in lane.gpus]
    return GpuRequest(ids[0] if ids else None, tuple(ids[1:]), count=cell.axes.devices)


def host_metadata(entry: Entry, prepared: Prepared, placement: dict[str, Any]) -> dict[str, Any]:
    """What the host adds to a record's metadata: the environment's facts (lock, image), where
    the cell ran, the cell's method version (its comparability key), the runner's version (for
    information) and the variables the matrix set for the worker."""
    user = entry.cell.user_workload
    return {**prepared.metadata, **placement, **gpustate.lock_metadata(placement),
            "method_version": entry.cell.method_version, "runner_version": runner_version(),
            "worker_env": dict(entry.cell.env),
            **({"workload_sha256": user.sha256} if user is not None else {})}


def adopt_orphan(entry: Entry, store: Store, seed: int,
                 host_metadata: dict[str, Any]) -> Record | None:
    """On resume: a worker that finished while the runner died before storing its record left
    a complete result.json; store it instead of measuring again (nothing finished is lost)."""
    path = store.orphaned_result(entry.key)
    found = record_mod.read_json_object(path) if path else None
    if found is None or found.get("cell_id") != entry.cell.id:
        return None
    spec = cell_spec(entry.cell, entry.repeat, store.run_id, seed, str(path))
    outcome = Outcome(returncode=0, timed_out=False, wall_s=None)
    record = record_mod.finalize(spec, outcome, record_mod.worker_result(found, spec),
                                 host_metadata, f"logs/{entry.key}.log",
                                 notes={"adopted_after_interrupt": True})
    store.write_record(entry.key, record)
    return record


def min_free_mb() -> int:
    return int(settings.get(settings.MIN_FREE_MB))


def check_free_disk(store: Store) -> None:
    """Before each cell: stop (one line, finished cells kept) when the run folder's disk is
    nearly full, rather than losing a measurement to a failed write."""
    free_mb = shutil.disk_usage(store.root).free / 2**20
    if free_mb < min_free_mb():
        raise UsageError(f"{store.root}: only {free_mb:.0f} MB free on its disk, below "
                         f"{min_free_mb()} MB ({settings.MIN_FREE_MB})")


def settle_before(cell: Cell, lane: Lane, on_status: Callable[[str], None],
                  stop: threading.Event | None = None) -> dict[str, Any] | None:
    """[run] settle: wait for a quiet GPU before a GPU cell on this host's lane (a Ray slot's
    GPU is on its node; a CPU cell needs none); the record's `settle`."""
    if cell.axes.device == "cpu" or not lane.local or lane.gpu is None:
        return None
    settled = [gpustate.settle_gpu(gpu.device_id, cell.settle_s, cell.settle_temp_c, on_status,
                                   stop) for gpu in lane.gpus]      # a joined lane: each GPU
    if len(settled) > 1 and settled[0] is not None:
        return {**settled[0], "others": settled[1:]}
    return settled[0]
