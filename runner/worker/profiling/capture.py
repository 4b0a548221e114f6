"""The framework's own profiler around the profiled steps, one small class per profiler, alike in
shape: `begin(total, warmup)`, `before_step(k)` and `after_step(k)` around each of the `total`
steps, `end()`, then `trace()` (the Chrome trace: {"traceEvents": [...], ...}) and `kernels()`
(kernels.json). The first `warmup` steps warm the profiler and are not in the trace; every
traced step carries a step marker:
- torch (torch, Keras on torch, Hugging Face): torch.profiler with a schedule (wait 0, warmup,
  active) and `prof.step()` after each step: `ProfilerStep#N` markers;
- JAX (jax, Keras on JAX): jax.profiler.start_trace/stop_trace and a StepTraceAnnotation per
  step; JAX writes the Chrome trace itself (`<host>.trace.json.gz`);
- TensorFlow (tensorflow, Keras on TensorFlow, Keras 2): tf.profiler.experimental with a Trace
  per step (`step_num`), its XSpace converted by xspace.py;
- NumPy (and anything without a profiler of its own): cProfile, its functions as the rows.
Each imports its framework when it begins (worker side)."""

from __future__ import annotations

import cProfile
import gzip
import json
import pstats
import time
from pathlib import Path
from typing import Any

from .. import catalog
from . import hlo, reduce, xspace


class Capture:
    source = ""

    def __init__(self, settings: dict[str, Any], folder: Path) -> None:
        self.settings = settings
        self.folder = folder
        self.warmup = 0
        self._trace: dict[str, Any] | None = None

    def begin(self, total: int, warmup: int) -> None:
        self.warmup = warmup

    def before_step(self, k: int) -> None:
        pass

    def after_step(self, k: int) -> None:
        pass

    def end(self) -> None:
        pass

    def trace(self) -> dict[str, Any]:
        if self._trace is None:
            raise RuntimeError(f"{self.source}: no trace was captured")
        return self._trace

    def kernels(self) -> dict[str, Any]:
        return reduce.reduce_trace(self.trace()["traceEvents"], source=self.source,
                                   fusions=self.fusions)

    # (module, fusion) → what it computes, where the profile carries its HLO (hlo.py)
    fusions: dict[tuple[str, str], str] = {}


class TorchCapture(Capture):
    source = "torch.profiler"

    def begin(self, total: int, warmup: int) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        super().begin(total, warmup)
        activities = [ProfilerActivity.CPU]
        if "device" in self.settings["activities"] and torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.profiler = profile(activities=activities,
                                schedule=schedule(wait=0, warmup=warmup, active=total - warmup,
                                                  repeat=1),
                                record_shapes=self.settings["record_shapes"],
                                with_stack=self.settings["with_stack"])
        self.profiler.start()

    def after_step(self, k: int) -> None:
        self.profiler.step()

    def end(self) -> None:
        self.profiler.stop()
        path = self.folder / "torch-trace.json"
        self.profiler.export_chrome_trace(str(path))
        self._trace = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        path.unlink()


class JaxCapture(Capture):
    source = "jax.profiler"

    def begin(self, total: int, warmup: int) -> None:
        import jax

        super().begin(total, warmup)
        self.jax = jax
        self.annotation: Any = None

    def before_step(self, k: int) -> None:
        if k == self.warmup:
            self.jax.profiler.start_trace(str(self.folder / "jax"))
        if k >= self.warmup:
            self.annotation = self.jax.profiler.StepTraceAnnotation(reduce.STEP_NAME,
                                                                    step_num=k)
            self.annotation.__enter__()

    def after_step(self, k: int) -> None:
        if self.annotation is not None:
            self.annotation.__exit__(None, None, None)
            self.annotation = None

    def end(self) -> None:
        self.after_step(-1)
        self.jax.profiler.stop_trace()
        found = sorted((self.folder / "jax").rglob("*.trace.json.gz"))
        if not found:
            raise RuntimeError("jax.profiler wrote no .trace.json.gz")
        with gzip.open(found[-1], "rt", encoding="utf-8", errors="replace") as handle:
            self._trace = json.load(handle)
        spaces = sorted((self.folder / "jax").rglob("*.xplane.pb"))
        self.fusions = hlo.fusion_kinds(spaces[-1]) if spaces else {}


class TensorflowCapture(Capture):
    source = "tf.profiler"

    def begin(self, total: int, warmup: int) -> None:
        import tensorflow as tf

        super().begin(total, warmup)
        self.tf = tf
        self.step_trace: Any = None

    def before_step(self, k: int) -> None:
        if k == self.warmup:
            self.tf.profiler.experimental.start(str(self.folder / "tf"))
        if k >= self.warmup:
            self.step_trace = self.tf.profiler.experimental.Trace(reduce.STEP_NAME, step_num=k,
                                                                  _r=1)
            self.step_trace.__enter__()

    def after_step(self, k: int) -> None:
        if self.step_trace is not None:
            self.step_trace.__exit__(None, None, None)
            self.step_trace = None

    def end(self) -> None:
        self.after_step(-1)
        self.tf.profiler.experimental.stop()
        found = sorted((self.folder / "tf").rglob("*.xplane.pb"))
        if not found:
            raise RuntimeError("tf.profiler wrote no .xplane.pb")
        self._trace = {"traceEvents": xspace.events_of(xspace.read_xspace(found[-1])),
                       "displayTimeUnit": "ms"}


# The runner's own modules (the clock, this capture): not the workload's functions.
HARNESS = ("/runner/worker/bench.py", "/runner/worker/profiling/")


class PythonCapture(Capture):
    """cProfile over the traced steps: Python functions (NumPy's calls among them) as rows, by
    their own time; the trace holds the steps alone (cProfile keeps no timeline)."""

    source = "cProfile"

    def begin(self, total: int, warmup: int) -> None:
        super().begin(total, warmup)
        self.profiler = cProfile.Profile()
        self.spans: list[tuple[float, float]] = []
        self.started = 0.0

    def before_step(self, k: int) -> None:
        if k >= self.warmup:
            self.started = time.perf_counter()
            self.profiler.enable()

    def after_step(self, k: int) -> None:
        if k >= self.warmup:
            self.profiler.disable()
            self.spans.append((self.started, time.perf_counter()))

    def end(self) -> None:
        origin = self.spans[0][0] if self.spans else 0.0
        self._trace = {"traceEvents": [
            {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "python (cProfile)"}},
            *({"ph": "X", "pid": 1, "tid": 1, "name": reduce.STEP_NAME, "ts": (a - origin) * 1e6,
               "dur": (b - a) * 1e6, "args": {"step_num": k}}
              for k, (a, b) in enumerate(self.spans, self.warmup))], "displayTimeUnit": "ms"}

    def kernels(self) -> dict[str, Any]:
        stats = pstats.Stats(self.profiler)
        steps = max(1, len(self.spans))
        rows: dict[str, dict[str, list[float]]] = {}
        calls = 0
        def harness(filename: str) -> bool:
            return any(part in filename.replace("\\", "/") for part in HARNESS)

        for (filename, line, function), entry in stats.stats.items():  # type: ignore[attr-defined]
            _, ncalls, tottime, _, callers = entry
            called_by_harness = bool(callers) and all(harness(c[0]) for c in callers)
            if harness(filename) or "_lsprof" in function or called_by_harness:
                continue                  # the runner's own clock and this capture
            name = function if filename == "~" else f"{Path(filename).name}:{line}({function})"
            # cProfile sums the steps: one mean per step stands for each of them.
            rows[name] = {"count": [ncalls / steps], "us": [tottime * 1e6 / steps]}
            calls += ncalls
        per_step = [{"step": k, "ms": (b - a) * 1000, "busy_us": None, "idle_pct": None,
                     "launches": calls / steps} for k, (a, b) in enumerate(self.spans)]
        return reduce.table(rows, per_step, source=self.source, device="cpu",
                            time_basis="Python self time")


# The capture of each profiler an engine's record names (catalog/apis.py: Engine.profiler).
CAPTURES: dict[str, type[Capture]] = {"torch.profiler": TorchCapture, "jax.profiler": JaxCapture,
                                      "tf.profiler": TensorflowCapture, "cProfile": PythonCapture}


def capture_for(api: str, backend: str | None, settings: dict[str, Any],
                folder: Path) -> Capture:
    """The capture of the profiler the cell's engine ships (its API's record). An engine without
    one, or with one this module has no capture for, is refused: never another profiler's."""
    engine = catalog.api(api, backend).engine_record
    if engine is None or not engine.profiler:
        raise RuntimeError(engine.profiler.reason if engine is not None else
                           f"{api} on backend {backend!r}: no engine known, so no profiler")
    kind = CAPTURES.get(engine.profiler.how)
    if kind is None:
        raise RuntimeError(f"{engine.name}'s profiler {engine.profiler.how!r} has no capture in "
                           "runner/worker/profiling/capture.py")
    return kind(settings, folder)
