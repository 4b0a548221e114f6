"""The cell protocol shared by host and worker: one JSON spec in, one JSON result out.

Standard library only: the host imports this module too (it is the single definition of the
statuses, the spec and the result record), and the worker must never import host modules.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, get_args
from collections.abc import Callable, Iterator


SCHEMA_VERSION: Final = 1

# The timed window's energy is read from NVML's counter: it is trusted (and, on a GPU with
# steps = "auto", the window is made long enough) from this many of the counter's update
# intervals, its quantisation then under 1/20 = 5 % (an interval at each end); where the
# interval was not measured, ENERGY_RESOLUTION_UNKNOWN_S is assumed.
ENERGY_WINDOW_RESOLUTIONS = 20
ENERGY_RESOLUTION_UNKNOWN_S = 0.1

# Set by an executor that handed the worker a GPU (a container's device request, or a local
# worker on a host with a GPU): there, device = "auto" means the GPU, and a framework that does
# not see it is a broken image, never a silent CPU run.
GPU_GIVEN_ENV = "DL_BENCH_GPU_GIVEN"

# Set by the executor: "fresh" when the worker's compilation caches (inductor, Triton, CUDA's
# PTX cache) start empty (a new container, or the local executor's per-attempt cache folders),
# "kept" when they are the user's own, warm from earlier runs and repeats
# ([run] keep_compile_caches). The worker copies it into the record's compile_cache.
COMPILE_CACHE_ENV = "DL_BENCH_COMPILE_CACHE"

# Every outcome a cell × repeat can have, decided in one place each: `status_for_exception` in the
# worker, `runner.results.data.records.status_from_outcome` on the host. no_gpu: the host has a
# GPU and the cell asked for it (device = "auto" or "gpu"), but the framework in the environment
# cannot see it (a CPU build, CUDA libraries it cannot load): the cell fails rather than
# measuring the CPU silently.
Status = Literal["ok", "failed", "crashed", "timeout", "oom", "no_gpu", "not_applicable"]
STATUSES: tuple[Status, ...] = get_args(Status)


# The spec's settings a cell carries from the matrix to its worker (Cell.settings): each a field
# of CellSpec declared with `setting`, which says its default, the [run] key that sets it (if
# one does) and whether it changes what the cell computes (a coordinate: part of the cell id,
# when it differs from its default, so that cells without it keep their ids). Nothing else names
# them: runner/matrix.py fills Cell.settings from the matrix (`settings_from`) and
# runner/cells.py copies them into the spec.
SETTING = "dl_bench_setting"


def setting(default: Any = MISSING, *, factory: Callable[[], Any] | None = None,
            run_key: str | None = None, coordinate: bool = False) -> Any:
    meta = {SETTING: {"run_key": run_key, "coordinate": coordinate}}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


class UserWorkloadEntry(TypedDict):
    """A user workload as a cell spec carries it across the process boundary (the host's
    schema/user_workloads.py spec_entry, run/cells.py adds runs_as; the worker's user_code.py
    and apis/user_common.py read it), and as every record of its cells keeps it."""

    name: str
    file: str                           # the user's file, as the matrix names it
    module: str                         # its module name, imported from the staged copy
    folder: str                         # the staged copy's folder under the run's workloads/
    sha256: str                         # the digest of the code the host staged
    defaults: dict[str, Any]            # its options' defaults
    runs_as: NotRequired[str | None]    # "model" | "step" for this cell's API and task


@dataclass(frozen=True, kw_only=True)
class CellSpec:
    """What the executor hands the worker (spec.json), field by field: the cell's coordinates,
    then one field per axis of the catalog (tests/worker/test_catalog.py fails when it has an
    axis this class does not declare, in the catalog's order and with its type), then the run's
    settings. The field order is the order of spec.json and of a record's fields."""

    # --- which cell
    run_id: str
    cell_id: str
    cell_name: str
    repeat: int
    environment: str
    api: str
    backend: str | None
    image: str | None                   # None: an existing interpreter (python = ...)
    workload: str
    # --- one field per axis of runner.worker.catalog (catalog/axes.py), with its type
    task: str
    batch_size: int
    precision: str
    jit: bool | str
    size: str
    tf32: bool | None
    steps_per_execution: int
    data: str
    device: str
    # Axes declared after specs were first written: a spec without them ran at their catalog
    # default (tests/worker/test_catalog.py checks these are the catalog's).
    devices: int = 1
    scaling: str = "weak"
    # --- the settings
    options: dict[str, Any]
    steps: int | str                    # timed steps, or "auto": until min_time_s (see bench.py)
    warmup_steps: int
    seed: int
    result_path: str
    # steps = "auto": the timed window lasts at least min_time_s, and at most max_time_s (once
    # one sample is in).
    min_time_s: float = setting(1.0, run_key="min_time")
    max_time_s: float = setting(60.0, run_key="max_time")
    # A calibration (matmul only): time each of these sizes, keep the fastest in TFLOP/s.
    calibration_sizes: list[int] = setting(factory=list, coordinate=True)
    # One block size per cell (pyperf hands its calibrated loop count to every worker): the
    # calls per sample the cell's first ok repeat calibrated, handed by the host to its later
    # repeats. Given, the worker's clock uses it and does not calibrate; None: calibrate.
    calls_per_sample: int | None = None
    # After the cell's timed window, pair the worker's clock with a bare loop of the same step
    # (runner.worker.overhead): the harness's own cost, in the record's extra.harness_overhead.
    harness_overhead: bool = setting(False, coordinate=True)
    # A workload from the user's own file: {name, file, module, folder, sha256, defaults}; the
    # worker imports its staged copy (runner/worker/user_code.py). None: a built-in workload.
    user_workload: UserWorkloadEntry | None = None
    # A profiled pass of the cell instead of a timed repeat (runner/worker/profiling/): {steps,
    # warmup, activities, record_shapes, with_stack, max_trace_mb}; None: a timed repeat.
    profile_pass: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CellSpec:
        """The spec of a spec.json (keys it does not declare are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def settings_fields() -> dict[str, Field[Any]]:
    """The fields of CellSpec declared with `setting`, in their order."""
    return {f.name: f for f in fields(CellSpec) if SETTING in f.metadata}


def _default(spec_field: Field[Any]) -> Any:
    if spec_field.default_factory is not MISSING:
        return spec_field.default_factory()
    return spec_field.default


def settings_from(run: Any = None, **given: Any) -> dict[str, Any]:
    """A cell's settings: each one `given`, else the value of the [run] key it names (an
    attribute of `run`, the matrix's RunSettings), else its default."""
    unknown = set(given) - set(settings_fields())
    if unknown:
        raise TypeError(f"not settings of CellSpec: {sorted(unknown)}")
    out: dict[str, Any] = {}
    for name, spec_field in settings_fields().items():
        run_key = spec_field.metadata[SETTING]["run_key"]
        if name in given:
            out[name] = given[name]
        elif run_key is not None and run is not None:
            out[name] = getattr(run, run_key)
        else:
            out[name] = _default(spec_field)
    return out


def coordinate_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings among a cell's coordinates: those that change what it computes, where they
    differ from their default (a cell that does not use one keeps the id it had without it)."""
    return {name: settings[name] for name, spec_field in settings_fields().items()
            if spec_field.metadata[SETTING]["coordinate"] and name in settings
            and settings[name] != _default(spec_field)}


# The result record, schema 1. One entry per field: (who fills it, what it means).
# "spec": copied from the cell spec; "worker": measured inside the environment;
# "host": added by the host when it stores the record (summaries are never computed in a worker).
RECORD_FIELDS: dict[str, tuple[str, str]] = {
    "schema": ("worker", "record schema version"),
    "status": ("worker", "ok | failed | crashed | timeout | oom | no_gpu | not_applicable"),
    "error": ("worker", "error text when status is not ok, else null"),
    **{f.name: ("spec", "cell coordinate / run setting") for f in fields(CellSpec)
       if f.name != "result_path"},
    # time
    "samples_ms": ("worker", "raw samples of the timed loop, per step (ms): sample time / "
                   "(steps_per_call × calls_per_sample)"),
    "steps_per_call": ("worker", "steps the framework ran per timed call; samples are call time / this"),
    "calls_per_sample": ("worker", "calls timed together in one sample with one device "
                         "synchronisation at its end (block samples; 1: every call synchronised)"),
    "block_source": ("worker", "how calls_per_sample was chosen: calibrated (by this repeat, "
                     "after its warm-up), handed_over (the spec's: the cell's first ok repeat "
                     "calibrated it), or per_call (a step that returns to the host, one call "
                     "per sample)"),
    "timing": ("worker", "how a sample was taken (what a step is, how the device was synchronised)"),
    "outliers": ("worker", "[index, ms] of timed samples that hold a stall: a call of 10× the "
                 "median call or more, in a block of k calls an excess over the median block of "
                 "9/k of it and beyond the blocks' own spread (counted, never removed)"),
    "epoch_boundary_samples": ("worker", "indices of timed samples that contain the first step "
                               "of a new epoch (iterator rebuild, reshuffle); null without epochs"),
    "import_s": ("worker", "importing the framework and the workload module, s"),
    "setup_s": ("worker", "building the model and its data, s"),
    "compile_s": ("worker", "duration of the first warm-up call (tracing/compilation included), s"),
    "compile_cache": ("worker", "the compilation caches compile_s ran with: 'fresh' (empty: a new "
                      "container, or the local executor's per-attempt cache folders) or 'kept' "
                      "([run] keep_compile_caches: the user's caches, warm from earlier runs and "
                      "repeats); null when the executor did not say"),
    "compilations": ("worker", "{before_timed, timed, counted}: the framework's compilations "
                     "(counted says which: XLA compiles, tf.function traces, dynamo graphs) "
                     "before the timed window and inside it (a recompilation in the window is "
                     "timed as a step); null where the framework has no counter"),
    "warmup_s": ("worker", "durations of all warm-up calls, s"),
    "train_s": ("worker", "duration of the whole timed loop, s"),
    "worker_s": ("worker", "the worker from its first line to writing the result (the interpreter's "
                 "own start-up is the rest of wall_s), s"),
    "items_per_step": ("worker", "samples (or tokens / elements) processed per step; Stable "
                       "Diffusion predict, whose step is one denoising step: images per call / "
                       "num_steps, so that items/s is images/s and energy per item is per image"),
    # memory
    "rss_initial_mb": ("worker", "process RSS after the framework import, before the workload is built"),
    "rss_peak_mb": ("worker", "peak process RSS over the worker's life up to the end of the "
                    "measurement, before its answer is taken (kernel high-water mark)"),
    "vram_initial_mb": ("worker", "framework-native device memory in use before the workload is built"),
    "vram_peak_mb": ("worker", "framework-native device memory peak (null without a GPU)"),
    "vram_source": ("worker", "which framework counter gave vram_*"),
    "nvml_memory_peak_mb": ("worker", "NVML device memory used, peak over the timed window"),
    "allocator": ("worker", "allocator / preallocation settings in force"),
    # GPU and CPU
    "gpu_util_mean": ("worker", "NVML GPU utilisation over the timed window, %"),
    "gpu_power_mean_w": ("worker", "NVML power over the timed window, W"),
    "gpu_energy_j": ("worker", "NVML total-energy counter delta over the timed window, J"),
    "gpu_idle_power_w": ("worker", "the device's power at rest, from the energy counter's "
                         "delta over a second, W (energy above idle: host); read before the "
                         "framework is imported, so no framework's own rest draw is in it (read "
                         "after, a JAX context read 122 W against torch's 80 W on an H200, "
                         "nothing running 79.8 W)"),
    "gpu_energy_resolution_s": ("worker", "the NVML energy counter's update interval, measured "
                                "at rest, s: the timed window's energy is trusted from "
                                "ENERGY_WINDOW_RESOLUTIONS of them"),
    "gpu_sm_clock_mhz": ("worker", "mean SM clock over the timed window, MHz"),
    "gpu_sm_clock_min_mhz": ("worker", "lowest SM clock sampled in the timed window, MHz"),
    "gpu_mem_clock_mhz": ("worker", "mean memory clock over the timed window, MHz"),
    "gpu_mem_clock_min_mhz": ("worker", "lowest memory clock sampled in the timed window, MHz"),
    "gpu_other_processes": ("worker", "{share, samples, own_pid_listed, processes: [{pid, name, "
                            "used_mb}]}: compute processes on the cell's GPU other than the "
                            "worker during the timed window (NVML's process list; share: of the "
                            "samples that saw one); null without a GPU or a process list"),
    "gpu_clock_events": ("worker", "clock-event (throttle) reasons seen during the timed window"),
    "host_gpu": ("host", "container cells: the GPU sampled from the host over the container's life "
                 "(a cross-check of the worker's own window; null for local cells)"),
    "cpu_util_mean": ("worker", "process CPU time / wall time over the timed window, % of one core"),
    "host_other_cpu": ("worker", "{other_cpu_s, share, steal_share, cpus, window_s}: CPU time "
                       "other processes used on the host during the timed window (the host's "
                       "busy time minus the worker's own), as a share of the host's CPU capacity "
                       "over the window; steal_share: time the hypervisor gave other VMs"),
    "settle": ("host", "GPU cells: the wait before the cell for a quiet GPU ([run] settle): "
               "{settled, waited_s, start_temp_c, util, other_processes, why}; null where "
               "nothing was waited for (a CPU cell, no GPU, settle = 0, a Ray slot)"),
    # work
    "flops_per_step": ("worker", "floating-point operations per step where known"),
    # sanity
    "loss_first": ("worker", "loss at the first (warm-up) step"),
    "loss_last": ("worker", "loss at the last timed step (Keras: the mean over the last timed "
                  "call's steps_per_execution steps)"),
    "accuracy": ("worker", "accuracy on a held-out split where it applies"),
    "answer": ("worker", "a small fingerprint of what the cell computed on its seeded inputs "
               "(norms of the output, initial loss and logits, first-step loss, first generated "
               "tokens; runner/worker/apis/answers.py), compared across the environments of a "
               "row by the report; null where the workload records none"),
    "extra": ("worker", "workload-specific figures (epoch time, tokens/s, sequence length, ...)"),
    "profile": ("worker", "a profiled pass's capture (profiles/<cell>/profile.json only; null in "
                "every timed record): the profiler, its settings, the profiled steps' times "
                "(step_ms, profiled_step_ms: never samples of the cell), kernels.json's table, the "
                "Chrome trace (written to trace.json.gz by the host) and whether it was cut"),
    "effective": ("worker", "axis values actually in effect inside the framework; on every "
                  "API: tf32 (bool: float32 matmuls may run as TF32 on this device, read from "
                  "the framework and the device's compute capability; false on a CPU), "
                  "tf32_detail (the flags read: matmul and conv paths, the setting, the "
                  "capability) and gc_in_timed_window ('disabled': Python's GC was off during "
                  "the timed samples); on torch (and Keras on torch, hf) cudnn_benchmark and "
                  "cudnn_deterministic as they were after the window; on generate cells the "
                  "work of one call (apis/first_token.py WORK_KEYS)"),
    "metadata": ("worker", "flat dict of prefixed keys from runner.worker.metadata.KEYS"),
    "distributions": ("worker", "distributions installed in the environment, name → version "
                      "(their digest is metadata.distributions_sha256)"),
    # host
    "returncode": ("host", "worker exit code (null when killed on timeout)"),
    "wall_s": ("host", "wall time of the whole worker process or container, s"),
    "usd": ("host", "what the process cost at list price: wall_s × the GPUs the cell holds (its "
            "devices on a GPU, else one share) × the per-GPU share of the [cost] VM's price per "
            "hour (a list-price estimate, USD; null without [cost])"),
    "log": ("host", "log file of this cell × repeat, relative to the run folder"),
    "median_ms": ("host", "median of samples_ms"),
    "mean_ms": ("host", "mean of samples_ms"),
    "p10_ms": ("host", "10th percentile of samples_ms"),
    "p90_ms": ("host", "90th percentile of samples_ms"),
    "min_ms": ("host", "minimum of samples_ms"),
    "max_ms": ("host", "maximum of samples_ms"),
    "stdev_ms": ("host", "sample standard deviation of samples_ms"),
    "items_per_s": ("host", "items_per_step / median step time"),
    "achieved_tflops": ("host", "flops_per_step / median step time, TFLOP/s"),
}

WORKER_FIELDS = tuple(k for k, (origin, _) in RECORD_FIELDS.items() if origin == "worker")


class WorkerResult(TypedDict):
    """result.json: what the worker writes, one key per field of RECORD_FIELDS that the spec or
    the worker fills (tests/worker/test_protocol.py holds the two together), built once by
    empty_result and filled in place by the worker; the host completes it into a Record
    (runner/results/data/records.py). Null where unknown, never zero."""

    schema: int
    status: Status
    error: str | None
    # --- copied from the spec (CellSpec's fields but result_path)
    run_id: str
    cell_id: str
    cell_name: str
    repeat: int
    environment: str
    api: str
    backend: str | None
    image: str | None
    workload: str
    task: str
    batch_size: int
    precision: str
    jit: bool | str
    size: str
    tf32: bool | None
    steps_per_execution: int
    data: str
    device: str
    devices: int
    scaling: str
    options: dict[str, Any]
    steps: int | str
    warmup_steps: int
    seed: int
    min_time_s: float
    max_time_s: float
    calibration_sizes: list[int]
    calls_per_sample: int | None        # the spec's, then the one the timed window used
    harness_overhead: bool
    user_workload: UserWorkloadEntry | None
    profile_pass: dict[str, Any] | None
    # --- measured (RECORD_FIELDS says what each means)
    samples_ms: list[float]
    steps_per_call: int
    block_source: str | None
    timing: str | None
    outliers: list[list[float]] | None
    epoch_boundary_samples: list[int] | None
    import_s: float | None
    setup_s: float | None
    compile_s: float | None
    compile_cache: str | None
    compilations: dict[str, Any] | None
    warmup_s: list[float]
    train_s: float | None
    worker_s: float | None
    items_per_step: float | None
    rss_initial_mb: float | None
    rss_peak_mb: float | None
    vram_initial_mb: float | None
    vram_peak_mb: float | None
    vram_source: str | None
    nvml_memory_peak_mb: float | None
    allocator: dict[str, Any] | None
    gpu_util_mean: float | None
    gpu_power_mean_w: float | None
    gpu_energy_j: float | None
    gpu_idle_power_w: float | None
    gpu_energy_resolution_s: float | None
    gpu_sm_clock_mhz: float | None
    gpu_sm_clock_min_mhz: float | None
    gpu_mem_clock_mhz: float | None
    gpu_mem_clock_min_mhz: float | None
    gpu_other_processes: dict[str, Any] | None
    gpu_clock_events: list[str] | None
    cpu_util_mean: float | None
    host_other_cpu: dict[str, Any] | None
    flops_per_step: float | None
    loss_first: float | None
    loss_last: float | None
    accuracy: float | None
    answer: dict[str, Any] | None
    extra: dict[str, Any]
    profile: dict[str, Any] | None
    effective: dict[str, Any]
    metadata: dict[str, Any]
    distributions: dict[str, str] | None


def empty_result(spec: CellSpec) -> WorkerResult:
    """A result with every worker field present: unknown values are null, never zero. Its keys
    in RECORD_FIELDS' order of the worker's fields, then the spec's: the order of result.json."""
    result: dict[str, Any] = {k: None for k in WORKER_FIELDS}
    result.update({k: v for k, v in spec.to_dict().items() if k != "result_path"})
    result.update(schema=SCHEMA_VERSION, status="failed", samples_ms=[], warmup_s=[],
                  steps_per_call=1, effective={}, metadata={}, extra={})
    # Every key of WorkerResult, each given its start value above (test_protocol.py checks the
    # keys both ways): the one place the result is made from a plain dict.
    return cast(WorkerResult, result)


def fill(result: WorkerResult, values: dict[str, Any]) -> None:
    """Copy figures whose keys are known only at run time (the monitor's telemetry, the GPU at
    rest, a follower rank's) into the result: each key must be a field of WorkerResult."""
    unknown = set(values) - set(WorkerResult.__annotations__)
    if unknown:
        raise KeyError(f"not fields of the worker's result: {sorted(unknown)}")
    cast(dict[str, Any], result).update(values)


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike) -> Iterator[str]:
    """A temporary file beside `path` to write to; when the block ends it is flushed to disk and
    renamed into place (and the folder synced, so the rename is on disk too), so a reader never
    sees a half-written file, whatever kills the writer; when the block raises it is removed and
    `path` keeps what it had. The temporary name is hidden and ends in .tmp, so no `*.json` (or
    `*.png`) pattern ever matches one."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)                    # mkstemp's 0600 would hide results from others
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """The rename itself reaches the disk only with its folder: without this a power cut can
    leave the old file (or none) although the write returned."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return                                  # a folder that cannot be opened (Windows)
    try:
        os.fsync(fd)
    except OSError:
        pass                                    # file systems that cannot sync a folder
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_target(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)


def json_text(payload: Any) -> str:
    """What write_json_atomic writes: indented JSON, no NaN or infinity, a final newline."""
    return json.dumps(_finite(payload), indent=1, allow_nan=False, default=_json_default) + "\n"


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    """Serialise first (a payload that cannot be written leaves the old file), then write."""
    write_text_atomic(path, json_text(payload))


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such values become null (the record says "unknown")."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    # NumPy scalars and the like: anything with item() becomes a plain Python number.
    if hasattr(value, "item"):
        return value.item()
    return str(value)
