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
import typing
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import (Annotated, Any, Final, Literal, NamedTuple, NotRequired, TypedDict, cast,
                    get_args)
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
    tier: str = "defaults"
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
    # A tuned cell's (or a tuning probe's) knobs, knob → value, each one its API's record
    # declares (catalog/apis.py); the worker applies them (runner/worker/tuning.py). {}: the
    # framework's defaults.
    tuning: dict[str, Any] = field(default_factory=dict)
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


# --- the result record, schema 1 ----------------------------------------------------------------
# Every field of a record is declared once, below, as a field of `Record`: its type (what the
# host stores and checks when it reads a record back, bounds included), who fills it and what it
# means, in the order of a record's JSON. Who fills it: "spec": copied from the cell spec (every
# field of CellSpec but result_path, in its order, is one: a field CellSpec adds is a record
# field with no other edit); "worker": measured inside the environment; "host": added by the host
# when it stores the record (summaries are never computed in a worker). RECORD_FIELDS, the
# schema that checks a record read back (runner/results/data/schemas.py) and the manual's table
# of fields (docs/results.md) are all made from it. WorkerResult (below) is the worker's own,
# stricter type of the fields it writes.

class Filled(NamedTuple):
    """Who fills a record field and what it means: the metadata of each field of Record."""

    origin: Literal["spec", "worker", "host"]
    help: str


def worker(help: str) -> Filled:
    return Filled("worker", help)


def host(help: str) -> Filled:
    return Filled("host", help)


def spec(help: str) -> Filled:
    return Filled("spec", help)


SPEC = spec("cell coordinate / run setting")      # a spec field Record does not describe


@dataclass(frozen=True)
class Bounds:
    """What the host checks of a value read back beyond its type (the worker writes plain
    values): the limits of a number, or the length of a list."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    min_length: int | None = None
    max_length: int | None = None


# Bounds of every number the statistics read: a finite number beyond them (1.7e308 ms) makes a
# sum, a square or a ratio of the reports overflow, so such a record is set aside like any other
# malformed one. A step lasts at most a cell's longest timeout and, to count as measured, at
# least a nanosecond; any other figure is at most 1e30 in size (FLOPs per step of the largest
# model and batch are far below; every product and square of two such figures stays finite).
MAX_TIMEOUT_S = 7 * 24 * 3600.0         # one cell attempt: a week (the matrix's bound too)
MAX_SAMPLE_MS = MAX_TIMEOUT_S * 1000.0
MIN_SAMPLE_MS = 1e-6
MAX_FIGURE = 1e30
MAX_COUNT = 10**12                      # steps per call, calls per sample
Sample = Annotated[float, Bounds(ge=0.0, le=MAX_SAMPLE_MS)]
Figure = Annotated[float, Bounds(ge=-MAX_FIGURE, le=MAX_FIGURE)]
Count = Annotated[int, Bounds(ge=1, le=MAX_COUNT)]
Positive = Annotated[int, Bounds(gt=0)]
Document = dict[str, Any]
# Values are typed where the host relies on them; Any where a field holds a nested document or a
# value the host takes as it is (those are not checked either).


class RecordStatus(TypedDict):
    schema: Annotated[Literal[1], worker("record schema version")]
    status: Annotated[Status, worker("ok | failed | crashed | timeout | oom | no_gpu | "
                                     "not_applicable")]
    error: Annotated[str | None, worker("error text when status is not ok, else null")]


class CellCoordinates(TypedDict):
    """Which cell: what a record and a summary of it both carry. The axes (task to device)
    have their catalog declaration's type, or None (tests/results/data/test_types.py)."""

    cell_id: Annotated[str, spec(
        "a short hash of the cell's coordinates and method version: the same cell measured the "
        "same way has the same id in every run")]
    cell_name: Annotated[str, spec(
        "workload-task-environment-b<batch>, then every axis and option that is not its "
        "default")]
    environment: Annotated[str, spec("the matrix's environment")]
    api: Annotated[str | None, spec("the environment's framework API")]
    backend: Annotated[str | None, spec("Keras 3's backend (api = keras); else null")]
    image: Annotated[str | None, spec(
        "the environment's image folder (images/<image>/); null for an existing interpreter "
        "(python = ...)")]
    workload: Annotated[str, spec("the workload, built in or the matrix's [workloads.<name>]")]
    task: str
    batch_size: Positive
    precision: str | None
    jit: bool | str | None
    size: str | None
    tf32: bool | None
    steps_per_execution: int | None
    data: str | None
    device: str | None
    devices: int | None
    scaling: str | None
    tier: str | None
    options: Annotated[Document, spec(
        "the workload's options: its size preset (or a user workload's defaults) with the "
        "benchmark's")]
    user_workload: Annotated[Document | None, spec(
        "a user workload's spec entry (name, file, module, staged folder, sha256, option "
        "defaults, runs_as); null for a built-in workload")]


class Measurements(TypedDict):
    """What the worker measured, and what the host adds about the process that ran it."""

    # time
    samples_ms: Annotated[list[Sample], worker(
        "raw samples of the timed loop, per step (ms): sample time / (steps_per_call × "
        "calls_per_sample)")]
    steps_per_call: Annotated[Count | None, worker(
        "steps the framework ran per timed call; samples are call time / this")]
    calls_per_sample: Annotated[Count | None, worker(
        "calls timed together in one sample with one device synchronisation at its end (block "
        "samples; 1: every call synchronised)")]
    block_source: Annotated[str | None, worker(
        "how calls_per_sample was chosen: calibrated (by this repeat, after its warm-up), "
        "handed_over (the spec's: the cell's first ok repeat calibrated it), or per_call (a step "
        "that returns to the host, one call per sample)")]
    timing: Annotated[Any, worker(
        "how a sample was taken (what a step is, how the device was synchronised)")]
    outliers: Annotated[list[Annotated[list[Figure], Bounds(min_length=2, max_length=2)]] | None,
                        worker("[index, ms] of timed samples that hold a stall: a call of 10× "
                               "the median call or more, in a block of k calls an excess over "
                               "the median block of 9/k of it and beyond the blocks' own spread "
                               "(counted, never removed)")]
    epoch_boundary_samples: Annotated[Any, worker(
        "indices of timed samples that contain the first step of a new epoch (iterator "
        "rebuild, reshuffle); null without epochs")]
    import_s: Annotated[Figure | None, worker(
        "importing the framework and the workload module, s")]
    setup_s: Annotated[Figure | None, worker("building the model and its data, s")]
    compile_s: Annotated[Figure | None, worker(
        "duration of the first warm-up call (tracing/compilation included), s")]
    compile_cache: Annotated[Any, worker(
        "the compilation caches compile_s ran with: 'fresh' (empty: a new container, or the "
        "local executor's per-attempt cache folders) or 'kept' ([run] keep_compile_caches: the "
        "user's caches, warm from earlier runs and repeats); null when the executor did not "
        "say")]
    compilations: Annotated[Any, worker(
        "{before_timed, timed, counted}: the framework's compilations (counted says which: XLA "
        "compiles, tf.function traces, dynamo graphs) before the timed window and inside it (a "
        "recompilation in the window is timed as a step); null where the framework has no "
        "counter")]
    warmup_s: Annotated[list[Figure] | None, worker("durations of all warm-up calls, s")]
    train_s: Annotated[Figure | None, worker("duration of the whole timed loop, s")]
    worker_s: Annotated[Figure | None, worker(
        "the worker from its first line to writing the result (the interpreter's own start-up "
        "is the rest of wall_s), s")]
    items_per_step: Annotated[Figure | None, worker(
        "samples (or tokens / elements) processed per step; Stable Diffusion predict, whose "
        "step is one denoising step: images per call / num_steps, so that items/s is images/s "
        "and energy per item is per image")]
    # memory
    rss_initial_mb: Annotated[Figure | None, worker(
        "process RSS after the framework import, before the workload is built")]
    rss_peak_mb: Annotated[Figure | None, worker(
        "peak process RSS over the worker's life up to the end of the measurement, before its "
        "answer is taken (kernel high-water mark)")]
    vram_initial_mb: Annotated[Figure | None, worker(
        "framework-native device memory in use before the workload is built")]
    vram_peak_mb: Annotated[Figure | None, worker(
        "framework-native device memory peak (null without a GPU)")]
    vram_source: Annotated[str | None, worker("which framework counter gave vram_*")]
    nvml_memory_peak_mb: Annotated[Figure | None, worker(
        "NVML device memory used, peak over the timed window")]
    allocator: Annotated[Document | None, worker("allocator / preallocation settings in force")]
    # GPU and CPU
    gpu_util_mean: Annotated[Figure | None, worker(
        "NVML GPU utilisation over the timed window, %")]
    gpu_power_mean_w: Annotated[Figure | None, worker("NVML power over the timed window, W")]
    gpu_energy_j: Annotated[Figure | None, worker(
        "NVML total-energy counter delta over the timed window, J")]
    gpu_idle_power_w: Annotated[Figure | None, worker(
        "the device's power at rest, from the energy counter's delta over a second, W (energy "
        "above idle: host); read before the framework is imported, so no framework's own rest "
        "draw is in it (read after, a JAX context read 122 W against torch's 80 W on an H200, "
        "nothing running 79.8 W)")]
    gpu_energy_resolution_s: Annotated[Figure | None, worker(
        "the NVML energy counter's update interval, measured at rest, s: the timed window's "
        "energy is trusted from ENERGY_WINDOW_RESOLUTIONS of them")]
    gpu_sm_clock_mhz: Annotated[Figure | None, worker(
        "mean SM clock over the timed window, MHz")]
    gpu_sm_clock_min_mhz: Annotated[Figure | None, worker(
        "lowest SM clock sampled in the timed window, MHz")]
    gpu_mem_clock_mhz: Annotated[Figure | None, worker(
        "mean memory clock over the timed window, MHz")]
    gpu_mem_clock_min_mhz: Annotated[Figure | None, worker(
        "lowest memory clock sampled in the timed window, MHz")]
    gpu_other_processes: Annotated[Any, worker(
        "{share, samples, own_pid_listed, processes: [{pid, name, used_mb}]}: compute "
        "processes on the cell's GPU other than the worker during the timed window (NVML's "
        "process list; share: of the samples that saw one); null without a GPU or a process "
        "list")]
    gpu_clock_events: Annotated[Any, worker(
        "clock-event (throttle) reasons seen during the timed window")]
    host_gpu: Annotated[Any, host(
        "container cells: the GPU sampled from the host over the container's life (a "
        "cross-check of the worker's own window; null for local cells)")]
    cpu_util_mean: Annotated[Figure | None, worker(
        "process CPU time / wall time over the timed window, % of one core")]
    host_other_cpu: Annotated[Any, worker(
        "{other_cpu_s, share, steal_share, cpus, window_s}: CPU time other processes used on "
        "the host during the timed window (the host's busy time minus the worker's own), as a "
        "share of the host's CPU capacity over the window; steal_share: time the hypervisor "
        "gave other VMs")]
    settle: Annotated[Any, host(
        "GPU cells: the wait before the cell for a quiet GPU ([run] settle): {settled, "
        "waited_s, start_temp_c, util, other_processes, why}; null where nothing was waited "
        "for (a CPU cell, no GPU, settle = 0, a Ray slot)")]
    # work
    flops_per_step: Annotated[Figure | None, worker(
        "floating-point operations per step where known")]
    # sanity
    loss_first: Annotated[Figure | None, worker("loss at the first (warm-up) step")]
    loss_last: Annotated[Figure | None, worker(
        "loss at the last timed step (Keras: the mean over the last timed call's "
        "steps_per_execution steps)")]
    accuracy: Annotated[Figure | None, worker("accuracy on a held-out split where it applies")]
    answer: Annotated[Document | None, worker(
        "a small fingerprint of what the cell computed on its seeded inputs (norms of the "
        "output, initial loss and logits, first-step loss, first generated tokens; "
        "runner/worker/apis/answers.py), compared across the environments of a row by the "
        "report; null where the workload records none")]
    extra: Annotated[Document | None, worker(
        "workload-specific figures (epoch time, tokens/s, sequence length, ...)")]
    profile: Annotated[Document | None, worker(
        "a profiled pass's capture (profiles/<cell>/profile.json only; null in every timed "
        "record): the profiler, its settings, the profiled steps' times (step_ms, "
        "profiled_step_ms: never samples of the cell), kernels.json's table, the Chrome trace "
        "(written to trace.json.gz by the host) and whether it was cut")]
    effective: Annotated[Document | None, worker(
        "axis values actually in effect inside the framework; on every API: tf32 (bool: "
        "float32 matmuls may run as TF32 on this device, read from the framework and the "
        "device's compute capability; false on a CPU), tf32_detail (the flags read: matmul and "
        "conv paths, the setting, the capability) and gc_in_timed_window ('disabled': Python's "
        "GC was off during the timed samples); on torch (and Keras on torch, hf) "
        "cudnn_benchmark and cudnn_deterministic as they were after the window; on generate "
        "cells the work of one call (apis/first_token.py WORK_KEYS)")]
    metadata: Annotated[Document | None, worker(
        "flat dict of prefixed keys from runner.worker.metadata.KEYS")]
    distributions: Annotated[Document | None, worker(
        "distributions installed in the environment, name → version (their digest is "
        "metadata.distributions_sha256)")]
    # host
    returncode: Annotated[int | None, host("worker exit code (null when killed on timeout)")]
    wall_s: Annotated[Figure | None, host(
        "wall time of the whole worker process or container, s")]
    usd: Annotated[Figure | None, host(
        "what the process cost at list price: wall_s × the GPUs the cell holds (its devices on "
        "a GPU, else one share) × the per-GPU share of the [cost] VM's price per hour (a "
        "list-price estimate, USD; null without [cost])")]
    log: Annotated[str | None, host(
        "log file of this cell × repeat, relative to the run folder")]


class StepSummary(TypedDict):
    """A repeat's per-step times summarised (results/data/records.py summarize), ms."""

    median_ms: Annotated[Figure | None, host("median of samples_ms")]
    mean_ms: Annotated[Figure | None, host("mean of samples_ms")]
    p10_ms: Annotated[Figure | None, host("10th percentile of samples_ms")]
    p90_ms: Annotated[Figure | None, host("90th percentile of samples_ms")]
    min_ms: Annotated[Figure | None, host("minimum of samples_ms")]
    max_ms: Annotated[Figure | None, host("maximum of samples_ms")]
    stdev_ms: Annotated[Figure | None, host("sample standard deviation of samples_ms")]


class Throughput(TypedDict):
    """items/s and TFLOP/s at the median step time (results/data/records.py throughput)."""

    items_per_s: Annotated[Figure | None, host("items_per_step / median step time")]
    achieved_tflops: Annotated[Figure | None, host(
        "flops_per_step / median step time, TFLOP/s")]


class Record(RecordStatus, CellCoordinates, Measurements, StepSummary, Throughput):
    """One cell × repeat as stored (cells/<cell>-r<repeat>.json, results.jsonl): every field of
    RECORD_FIELDS, None where unknown (Store.read_records completes a record read back). Its
    bases declare the fields in the record's order; the spec's fields none of them types (the
    run's settings) are typed here."""

    run_id: Annotated[str | None, spec("the run: <run name>/<its folder's timestamp>")]
    repeat: Annotated[Positive, spec("which repeat of the cell (from 1; each a fresh process)")]
    steps: Annotated[Any, spec('timed steps, or "auto": until min_time_s')]
    warmup_steps: Annotated[Any, spec(
        "calls before the timed window (not timed; the first is compile_s)")]
    seed: Annotated[Any, spec("the seed of the cell's inputs and weights")]
    min_time_s: Annotated[Any, spec("steps = auto: the timed window's least length, s")]
    max_time_s: Annotated[Any, spec(
        "steps = auto: the timed window's greatest length, once one sample is in, s")]
    calibration_sizes: Annotated[Any, spec(
        "a calibration (matmul): the sizes timed, the fastest kept (empty for a cell)")]
    harness_overhead: Annotated[Any, spec(
        "the harness's own cost measured after the timed window (extra.harness_overhead)")]
    profile_pass: Annotated[Document | None, spec(
        "a profiled pass's settings; null in every timed record")]
    tuning: Annotated[Document | None, spec(
        "a tuned cell's knobs, knob → value (docs/tuned.md; effective.tuning: what the worker "
        "applied); {} or null: the defaults")]


def _record_fields() -> dict[str, Filled]:
    """Every field of the record, in its order: Record's before the spec's, the spec's
    (CellSpec's but result_path, in its order: a field CellSpec adds is a record field), then
    Record's others; each filled as Record's declaration says, a spec field it does not say
    of by the spec."""
    declared = typing.get_type_hints(Record, include_extras=True)
    spec = [f.name for f in fields(CellSpec) if f.name != "result_path"]
    first = next(i for i, name in enumerate(declared) if name in spec)
    own = [name for name in declared if name not in spec]
    return {name: next((m for m in getattr(declared.get(name), "__metadata__", ())
                        if isinstance(m, Filled)), SPEC)
            for name in [*own[:first], *spec, *own[first:]]}


RECORD_FIELDS: dict[str, Filled] = _record_fields()
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
    tier: str
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
    tuning: dict[str, Any]
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
