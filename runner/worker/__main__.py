"""`python -m runner.worker spec.json result.json`: run one cell × repeat, write one result.

Exit code 0 whenever a result file was written, whatever the workload did (the status is in the
file); exit code 2 when the spec itself cannot be read.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import statistics
import os
import sys
import time
import traceback
from types import ModuleType
from typing import Any, NoReturn, cast

from . import distributions, ranks, tuning
from .apis import FrameworkBase, NoGpuError, Workload
from .apis import data_parallel as parallel
from .bench import BLOCK_TARGET_S, Bench, StepClock, run_loop, short_block
from .catalog import api as api_record
from .metadata import base_metadata, clean
from .monitor import Monitor, Nvml, peak_rss_mb, rss_mb
from .protocol import (COMPILE_CACHE_ENV, ENERGY_RESOLUTION_UNKNOWN_S, ENERGY_WINDOW_RESOLUTIONS,
                       RECORD_FIELDS, CellSpec, Status, WorkerResult, empty_result, fill,
                       write_json_atomic)

OOM_MARKERS = ("out of memory", "resource_exhausted", "resourceexhausted", "oom when allocating",
               "failed to allocate")


def status_for_exception(exc: BaseException) -> Status:
    """The one place a worker exception becomes a status."""
    if isinstance(exc, NoGpuError):
        return "no_gpu"
    if isinstance(exc, MemoryError):
        return "oom"
    text = f"{type(exc).__name__} {exc}".lower()
    if any(marker in text for marker in OOM_MARKERS):
        return "oom"
    return "failed"


def prepare_process_environment(spec: CellSpec) -> None:
    """Environment variables that must be set before a framework is imported."""
    if spec.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    for name, value in api_record(spec.api, spec.backend).variables.items():
        if "{backend}" not in value or spec.backend:      # no backend: the API's own default
            os.environ[name] = value.format(backend=spec.backend)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    parallel.prepare_environment(spec)


def measure(spec: CellSpec, result: WorkerResult) -> None:
    fw, workload, gpu = start_framework(spec, result)
    if spec.profile_pass is not None:     # a profiled pass: no timed window, no telemetry
        from .profiling.profiled import profile_cell

        profile_cell(parallel.global_spec(spec), result, fw, workload)
        return
    spec = energy_window(spec, gpu, result)
    if spec.calibration_sizes:
        bench, clock, monitor = calibrate(spec, fw, workload, gpu, result)
    else:
        started = time.perf_counter()
        # A data-parallel cell's workload builds for the global batch, which the API splits.
        bench = workload.build(parallel.global_spec(spec), fw)
        result["setup_s"] = time.perf_counter() - started
        clock, monitor = timed_window(spec, bench, gpu, fw)
    record_window(result, bench, clock, monitor)
    record_after_window(spec, result, bench, clock, fw)


def import_modules(spec: CellSpec) -> tuple[ModuleType, Workload]:
    """The cell's API package (its Framework) and workload module, imported. A user workload's
    bench is built by one module for every API (it imports the user's file); a declared one by
    the module the API's record names for it. benchmarks/overhead.py builds cells this way."""
    record = api_record(spec.api, spec.backend)
    framework = importlib.import_module(f"{__package__}.apis.{record.package}")
    module = "user_common" if spec.user_workload else record.workloads[spec.workload]
    return framework, cast(Workload, importlib.import_module(f"{__package__}.apis.{module}"))


def start_framework(spec: CellSpec,
                    result: WorkerResult) -> tuple[FrameworkBase, Workload, Nvml | None]:
    """Import the framework and the workload module, open NVML on a GPU, read the metadata and
    the initial memory: (the Framework, the workload module, the GPU or None). The device's
    power at rest is read before the framework is imported: a framework's context at rest
    draws power of its own (H200: JAX 122 W, torch 80 W, nothing 79.8 W), which read after the
    import made one framework's energy above idle smaller than another's for the same draw."""
    prepare_process_environment(spec)
    rest = Nvml.open(ranks.own_gpu()) if spec.device != "cpu" else None
    idle = rest.idle() if rest is not None else {}
    started = time.perf_counter()
    framework, workload = import_modules(spec)
    fw: FrameworkBase = framework.Framework(spec)
    result["import_s"] = time.perf_counter() - started
    result["rss_initial_mb"] = rss_mb()
    vram = fw.vram_mb()
    result["vram_initial_mb"] = vram[0] if vram else None
    gpu = Nvml.open(ranks.own_gpu()) if fw.device == "gpu" else None
    meta = base_metadata()
    if gpu is not None:
        meta.update(gpu.metadata())
    meta.update(fw.metadata())
    result["metadata"] = clean(meta)
    if gpu is not None:                 # at rest, before the framework (read above)
        fill(result, idle)
    fw.reset_peak()
    return fw, workload, gpu


def energy_window(spec: CellSpec, gpu: Nvml | None, result: WorkerResult) -> CellSpec:
    """On a GPU with steps = "auto": a timed window long enough for the energy counter to
    resolve (ENERGY_WINDOW_RESOLUTIONS of its measured update interval, more than min_time's
    default second where the counter is coarse); recorded in extra.energy_min_window_s."""
    if gpu is None or spec.steps != "auto":
        return spec
    resolution = result.get("gpu_energy_resolution_s") or ENERGY_RESOLUTION_UNKNOWN_S
    needed = ENERGY_WINDOW_RESOLUTIONS * resolution
    result["extra"]["energy_min_window_s"] = needed
    if needed <= spec.min_time_s:
        return spec
    return dataclasses.replace(spec, min_time_s=needed, max_time_s=max(spec.max_time_s, needed))


def record_window(result: WorkerResult, bench: Bench, clock: StepClock, monitor: Monitor) -> None:
    """The timed window's samples, how they were taken, and its telemetry."""
    telemetry = monitor.summary()
    fill(result, {k: v for k, v in telemetry.items() if k in RECORD_FIELDS})
    result["extra"].update({k: v for k, v in telemetry.items() if k not in RECORD_FIELDS})
    if bench.calls_per_epoch:           # the host's whole epochs (analysis/derived.py)
        result["extra"]["calls_per_epoch"] = bench.calls_per_epoch
    per_call = bench.steps_per_call
    per_sample = per_call * clock.calls_per_sample
    timing = bench.timing
    if not bench.returns_to_host:
        calls = clock.calls_per_sample
        chosen = ("the cell's first repeat calibrated it" if clock.block_source == "handed_over"
                  else "calibrated")
        timing = (f"blocks of {calls} call{'s' if calls > 1 else ''} timed together, the device "
                  f"synchronised once at the end of each block ({chosen} to last at least "
                  f"{BLOCK_TARGET_S * 1000:.0f} ms); one call: {timing}")
    result["samples_ms"] = [t * 1000.0 / per_sample for t in clock.timed_s]
    result["steps_per_call"] = per_call
    result["calls_per_sample"] = clock.calls_per_sample
    result["block_source"] = clock.block_source
    result["outliers"] = [[i, t * 1000.0 / per_sample] for i, t in clock.outliers()]
    result["epoch_boundary_samples"] = clock.epoch_boundaries if bench.calls_per_epoch else None
    result["timing"] = timing
    result["compile_s"] = clock.warmup_s[0]
    result["warmup_s"] = clock.warmup_s
    result["train_s"] = sum(clock.timed_s)
    result["items_per_step"] = bench.items_per_step
    result["flops_per_step"] = bench.flops_per_step
    short = short_block(clock, bench.returns_to_host)
    if short is not None:
        result["extra"]["block_short"] = short


def record_after_window(spec: CellSpec, result: WorkerResult, bench: Bench, clock: StepClock,
                        fw: FrameworkBase) -> None:
    """What is read once the timed window is over: losses, evaluation, memory peaks, the
    settings in effect, the harness's overhead where asked, and the answer last."""
    if bench.loss is not None:
        result["loss_first"] = float(bench.loss(clock.first_out))
        result["loss_last"] = float(bench.loss(clock.last_out))
    if bench.evaluate is not None:
        evaluation = bench.evaluate()
        result["accuracy"] = evaluation.pop("accuracy", None)
        result["extra"].update(evaluation)
    vram = fw.vram_mb()
    result["vram_peak_mb"] = vram[1] if vram else None
    result["vram_source"] = fw.vram_source if vram else None
    result["allocator"] = fw.allocator()
    result["effective"] = {**fw.effective, **fw.in_effect(), **bench.effective,
                           "gc_in_timed_window": clock.gc_in_timed_window,
                           **({"tuning": dict(spec.tuning)} if spec.tuning else {})}
    result["compile_cache"] = os.environ.get(COMPILE_CACHE_ENV)
    result["extra"].update(bench.extra)
    if spec.harness_overhead and getattr(fw, "agree", None) is None:   # after the window
        from . import overhead      # only here: its rounds are no part of a plain cell

        result["extra"]["harness_overhead"] = overhead.paired_rounds(bench, clock.calls_per_sample)
    # The answer last, once the peaks are read: its copies to the host are no part of the cell.
    result["rss_peak_mb"] = peak_rss_mb()
    result["answer"] = answer_of(bench, result)


def answer_of(bench: Bench, result: WorkerResult) -> dict[str, Any] | None:
    """The cell's answer (after the timed loop: never timed). A fingerprint that cannot be
    taken costs the answer, not the measurement: the reason goes to extra."""
    try:
        answer = dict(bench.answer()) if bench.answer is not None else {}
    except Exception as exc:  # the answer's failure, never the measurement's
        result["extra"]["answer_error"] = f"{type(exc).__name__}: {exc}"[:500]
        return None
    if bench.first_loss_in_answer and result.get("loss_first") is not None:
        answer["first_step_loss"] = result["loss_first"]
    return answer or None


def timed_window(spec: CellSpec, bench: Bench, gpu: Nvml | None,
                 fw: FrameworkBase) -> tuple[StepClock, Monitor]:
    """Warm-up, then the timed window (a fixed step count or steps = "auto"), the monitor's
    counters read at the start of the first timed sample and at the end of the last."""
    monitor = Monitor(gpu=gpu, compilations=fw.compilation_count, counted=fw.compilations_counted)
    fixed = spec.steps != "auto"
    handed = spec.calls_per_sample       # the cell's block size, from its first repeat
    clock = StepClock(warmup_calls=spec.warmup_steps,
                      calls_per_sample=handed or 1,
                      block_source="handed_over" if handed else "per_call",
                      timed_calls=max(1, math.ceil(int(spec.steps) / bench.steps_per_call))
                      if fixed else None,
                      sync=bench.sync, on_timed_start=monitor.__enter__,
                      on_timed_end=monitor.stop_counters,
                      min_time_s=spec.min_time_s, max_time_s=spec.max_time_s,
                      epoch_calls=bench.calls_per_epoch, keep_outputs=bench.loss is not None,
                      agree=getattr(fw, "agree", None))
    try:
        run_loop(bench, clock)
    finally:
        clock.end_timed()                 # a failed loop: GC back on (a finished one did it)
        if clock.done:
            monitor.__exit__(None, None, None)
    if not clock.done:
        raise RuntimeError(f"the workload stopped after {len(clock.timed_s)} timed samples, "
                           "before its timed window was complete")
    return clock, monitor


# The measured peak (calibrate): each size timed for at least CALIBRATION_GPU_MIN_S on a GPU
# (sustained: clocks and power settle; a 1 s window reads a boost the GPU does not keep), and a
# size whose step would last longer than CALIBRATION_MAX_STEP_S (from the last size timed,
# scaled by n³) is not timed: n = 16 384 on a 2-core CPU is ~22 s a step, minutes a window.
CALIBRATION_GPU_MIN_S = 3.0
CALIBRATION_MAX_STEP_S = 1.0
# A size's timed window in a calibration pass: (TFLOP/s, its clock, its monitor, its bench).
Timed = tuple[float, StepClock, Monitor, Bench]


def calibration_pass(spec: CellSpec, fw: FrameworkBase, workload: Workload, gpu: Nvml | None,
                     sizes: list[int], benches: dict[int, Bench],
                     skipped: list[dict[str, Any]] | None) -> dict[int, Timed]:
    """One timed window per size, smallest first: {n: (TFLOP/s, clock, monitor, bench)}. With
    `skipped` (the first pass), a size predicted too slow and every larger one are left out and
    listed there; benches are built once."""
    out: dict[int, Timed] = {}
    min_time = max(spec.min_time_s, CALIBRATION_GPU_MIN_S) if fw.device == "gpu" else spec.min_time_s
    last: tuple[int, float] | None = None
    for n in sizes:
        predicted = last[1] * (n / last[0]) ** 3 if last is not None else 0.0
        if skipped is not None and predicted > CALIBRATION_MAX_STEP_S:
            skipped += [{"n": m, "predicted_step_s": last[1] * (m / last[0]) ** 3}
                        for m in sizes[sizes.index(n):] if last is not None]
            break
        sized = dataclasses.replace(spec, options={**spec.options, "n": int(n)},
                                    min_time_s=min_time)
        bench = benches.get(n) or workload.build(sized, fw)
        benches[n] = bench
        clock, monitor = timed_window(sized, bench, gpu, fw)
        per_step_s = statistics.median(clock.timed_s) / (clock.calls_per_sample
                                                         * bench.steps_per_call)
        out[n] = (flops_of(bench) / per_step_s / 1e12, clock, monitor, bench)
        last = (n, per_step_s)
    return out


def flops_of(bench: Bench) -> float:
    """A calibrated workload's FLOPs per step (the matmul's recipe always gives them)."""
    if bench.flops_per_step is None:
        raise RuntimeError("a calibration times only a workload that gives its FLOPs per step")
    return bench.flops_per_step


def calibrate(spec: CellSpec, fw: FrameworkBase, workload: Workload, gpu: Nvml | None,
              result: WorkerResult) -> tuple[Bench, StepClock, Monitor]:
    """The device's measured peak: the matmul at each of spec.calibration_sizes that fits the
    device (steps auto, sustained on a GPU), twice: the first pass (which also warms the device)
    picks the size, the second, independent of that choice, measures it, so that picking the
    largest of several noisy medians cannot inflate the peak. Every size's figures go to extra;
    the record is the picked size's second pass."""
    started = time.perf_counter()
    benches: dict[int, Bench] = {}
    skipped: list[dict[str, Any]] = []
    first = calibration_pass(spec, fw, workload, gpu, sorted(spec.calibration_sizes), benches,
                             skipped)
    second = calibration_pass(spec, fw, workload, gpu, list(first), benches, None)
    chosen = max(first, key=lambda n: first[n][0])
    result["setup_s"] = time.perf_counter() - started
    result["extra"]["calibration"] = [
        {"n": n, "pass": number, "ms_per_step": flops_of(bench) / tflops / 1e9,
         "tflops": tflops}
        for number, timed in ((1, first), (2, second))
        for n, (tflops, _, _, bench) in timed.items()]
    result["extra"]["calibration_skipped"] = skipped
    result["extra"]["peak"] = {"n": chosen, "selected_tflops": first[chosen][0],
                               "tflops": second[chosen][0]}
    result["options"] = {**spec.options, "n": int(chosen)}
    _, clock, monitor, bench = second[chosen]
    return bench, clock, monitor


def record_distributions(result: WorkerResult) -> None:
    """What is installed in this environment (after the timed window: it reads every
    distribution's metadata from disk)."""
    try:
        installed = distributions.installed()
    except Exception as exc:  # a broken distribution's metadata: say so, keep the result
        result["extra"]["distributions_error"] = f"{type(exc).__name__}: {exc}"
        return
    result["distributions"] = installed
    result["metadata"]["distributions_sha256"] = distributions.digest(installed)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
    try:
        with open(spec_path, encoding="utf-8") as handle:
            spec = CellSpec.from_dict(json.load(handle))
    except (OSError, ValueError, TypeError) as exc:
        print(f"runner.worker: cannot read spec {spec_path}: {exc}", file=sys.stderr)
        return 2
    # The result's path as this process sees it (a container sees its cell folder elsewhere
    # than the host that wrote the spec): what a pass that writes files beside it reads.
    spec = dataclasses.replace(spec, result_path=result_path)
    result = empty_result(spec)
    started = time.perf_counter()
    followers = ranks.launch(spec, spec_path, result_path)    # a DDP cell's other ranks
    if followers is not None:
        followers.watch(lambda why: abandon(spec, result, result_path, started, why))
    try:
        measure(tuning.applied(spec), result)      # the tuned tier's knobs, if any
        result["status"] = "ok"
    except Exception as exc:  # errors become data: the status and the error text
        traceback.print_exc()
        result["status"] = status_for_exception(exc)
        lines = traceback.format_exception_only(type(exc), exc)
        result["error"] = "".join(lines).strip()[-4000:]
    finally:
        if result.get("rss_peak_mb") is None:        # a cell that failed before its answer
            result["rss_peak_mb"] = peak_rss_mb()
        if followers is not None:
            ranks.merge(result, followers.finish(ok=result["status"] == "ok"))
        record_distributions(result)
        result["worker_s"] = time.perf_counter() - started
        write_json_atomic(result_path, result)
    print(f"runner.worker: {spec.cell_name} r{spec.repeat}{rank_text()}: {result['status']}",
          flush=True)
    return 0


def rank_text() -> str:
    return f" rank {ranks.rank()}" if ranks.rank() else ""


def abandon(spec: CellSpec, result: WorkerResult, result_path: str, started: float,
            why: str) -> None:
    """Rank 0 of a DDP cell whose follower failed (it waits for it in a collective): the
    cell's failed record, then the end of this process."""
    result["status"] = "failed"
    result["error"] = f"a data-parallel rank failed: {why}"[-4000:]
    result["worker_s"] = time.perf_counter() - started
    if result.get("rss_peak_mb") is None:
        result["rss_peak_mb"] = peak_rss_mb()
    write_json_atomic(result_path, result)
    print(f"runner.worker: {spec.cell_name} r{spec.repeat}: failed ({why})", flush=True)
    os._exit(0)


def exit_now(code: int) -> NoReturn:
    """End the process as soon as its result is written, without the interpreter's teardown:
    the frameworks' atexit handlers and module finalisers took 1.1 s (torch), 1.0 s (JAX) and
    1.9 s (TensorFlow) of every process on this project's 2-core VM, all of it inside the
    process's wall time and none of it anything the result needs (it is written, atomically,
    and the streams are flushed here). What a framework left running (a compile worker, a
    thread pool) ends with the process; under the local executor its supervisor ends whatever
    it started besides."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
