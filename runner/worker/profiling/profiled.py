"""The profiled pass of a cell: the cell's own bench, built as for a timed repeat, warmed up as
one (its compilation outside the trace), then `warmup + steps` calls under the framework's
profiler, the device synchronised after every call so that each step's ops lie inside its
marker. Its step times are not samples of the cell: they go to the result's `profile` only
(profiles/<cell>/profile.json on the host), never to statistics, effects, compare or history.

A Keras fit or predict loop owns its calls: its clock (BlockClock) is given blocks of one call,
and the profiler's step markers sit at the clock's block boundaries.

The profiler's cost is measured in the same pass: before the profiler starts and after it
ends, the same `warmup + steps` calls run unprofiled, synchronised the same way (after every
call), and the profiled steps are set against those (`reference_step_ms`): a ratio of the
profiler alone, not of the timed repeats' other synchronisation regime (blocks of calls) nor of
another process."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..bench import StepClock, run_loop
from ..apis import FrameworkBase, Workload
from ..protocol import CellSpec, WorkerResult
from . import reduce
from .capture import capture_for

DEFAULTS = {"steps": 3, "warmup": 1, "activities": ["cpu", "device"], "record_shapes": False,
            "with_stack": False, "max_trace_mb": 64.0}


@dataclasses.dataclass
class ProfileClock(StepClock):
    """A clock that says when each timed call (one profiled step) ends."""

    on_sample: Callable[[int], None] = lambda index: None

    def tick(self, out: Any = None, calls: int = 1) -> None:
        before = len(self.timed_s)
        super().tick(out, calls)
        if len(self.timed_s) > before:
            self.on_sample(before)


def profile_cell(spec: CellSpec, result: WorkerResult, fw: FrameworkBase,
                 workload: Workload) -> None:
    """Build the cell's bench, profile it, and put what was captured in result["profile"]."""
    settings = {**DEFAULTS, **(spec.profile_pass or {})}
    warmup, steps = int(settings["warmup"]), int(settings["steps"])
    started = time.perf_counter()
    bench = workload.build(spec, fw)
    result["setup_s"] = time.perf_counter() - started
    folder = Path(tempfile.mkdtemp(prefix="profile-", dir=Path(spec.result_path).parent))
    capture = capture_for(spec.api, spec.backend, settings, folder)
    total = warmup + steps

    def step_ended(index: int) -> None:
        """Calls 0 … total − 1 run unprofiled (the reference before), then the profiler begins
        and calls total … 2·total − 1 are its steps 0 … total − 1, then it ends and the last
        `total` calls run unprofiled again (the reference after: a drift of the process shows
        as two references apart, never as the profiler's cost)."""
        phase, k = divmod(index, total)
        if phase == 1:
            capture.after_step(k)
            if k + 1 < total:
                capture.before_step(k + 1)
            else:
                capture.end()
        if index == total - 1:
            capture.begin(total, warmup)
            capture.before_step(0)

    clock = ProfileClock(warmup_calls=spec.warmup_steps, timed_calls=3 * total, sync=bench.sync,
                         calls_per_sample=1, block_source="handed_over", keep_outputs=False,
                         min_time_s=0.0, max_time_s=float("inf"), on_sample=step_ended)
    try:
        run_loop(bench, clock)
        trace = capture.trace()
        # JAX's trace ends with an empty {} (its viewer's trailing-comma guard): every event
        # kept has a phase, as the Chrome trace format asks.
        trace["traceEvents"] = [e for e in trace.get("traceEvents", [])
                                if isinstance(e, dict) and "ph" in e]
        kernels = capture.kernels()
    finally:
        clock.end_timed()
        shutil.rmtree(folder, ignore_errors=True)
    per_step = [t * 1000 / bench.steps_per_call for t in clock.timed_s]
    # each phase's first `warmup` calls left out alike (the profiler's start and end land there)
    before, step_ms, after = (per_step[k * total + warmup:(k + 1) * total] for k in range(3))
    trace_bytes, kept, cut = bounded_trace(trace, float(settings["max_trace_mb"]))
    result["compile_s"] = clock.warmup_s[0] if clock.warmup_s else None
    result["profile"] = {
        "source": capture.source, "settings": settings, "steps": steps, "warmup": warmup,
        "steps_per_call": bench.steps_per_call, "step_ms": step_ms,
        "profiled_step_ms": statistics.median(step_ms) if step_ms else None,
        # the same steps before the profiler began and after it ended, in the same process,
        # synchronised alike
        "reference_step_ms": before + after, "reference_before_ms": before,
        "reference_after_ms": after,
        "sync": "every call synchronised (the profiled steps and their unprofiled reference)",
        "kernels": kernels, "trace_gz_b64": base64.b64encode(trace_bytes).decode("ascii")
        if trace_bytes else None, "trace_steps_kept": kept, "truncated": cut}


def bounded_trace(trace: dict[str, Any], max_mb: float) -> tuple[bytes | None, int, str | None]:
    """The trace as gzipped JSON of at most max_mb megabytes uncompressed: whole, or cut to its
    first steps that fit (said in the third item); (None, 0, why) when not even one step does."""
    events = trace.get("traceEvents", [])
    limit = max_mb * 2**20
    text = json.dumps(trace)
    steps = sorted(float(e["ts"]) for e in events
                   if e.get("ph") == "X" and reduce.is_step_marker(e))
    if len(text) <= limit:
        return gzip.compress(text.encode("utf-8"), 6), len(steps), None
    for keep in range(len(steps) - 1, 0, -1):
        end = steps[keep]
        cut = {**trace, "traceEvents": [e for e in events if e.get("ph") != "X"
                                        or float(e.get("ts", 0.0)) < end]}
        text = json.dumps(cut)
        if len(text) <= limit:
            return (gzip.compress(text.encode("utf-8"), 6), keep,
                    f"trace cut to its first {keep} of {len(steps)} steps (max_trace_mb = "
                    f"{max_mb:g}); kernels.json has them all")
    return None, 0, (f"no trace kept: one step's trace is over max_trace_mb = {max_mb:g}; "
                     "kernels.json has every step")
