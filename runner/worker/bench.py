"""What every workload module returns, and the one timed loop that measures it.

A workload module (runner/worker/apis/<api>_api/<workload>.py) exposes
`build(spec: CellSpec, fw: Framework) -> Bench`. The worker then either calls `bench.step()`
repeatedly (the usual case), or hands a `StepClock` to `bench.drive` when the framework owns
the loop (Keras `model.fit` with a callback that ticks the clock once per call).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Bench:
    items_per_step: int                               # samples (or elements) per step
    step: Callable[[], Any] | None = None             # one call = steps_per_call steps
    drive: Callable[["StepClock"], None] | None = None  # framework-owned loop: ticks the clock
    sync: Callable[[Any], None] = lambda out: None    # wait until the device finished `out`
    loss: Callable[[Any], float] | None = None        # loss from a step's output
    evaluate: Callable[[], dict[str, Any]] | None = None  # after the loop (accuracy, ...)
    steps_per_call: int = 1
    flops_per_step: float | None = None
    timing: str = "one step() call per sample, device synchronised before the clock is read"
    effective: dict[str, Any] = field(default_factory=dict)  # axis values in effect
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepClock:
    """Times consecutive calls: each tick synchronises the device on the call's output, reads the
    clock, and files the interval since the previous tick as a warm-up or a timed sample.
    Intervals are contiguous, so the timed samples add up to the timed window exactly."""

    warmup_calls: int
    timed_calls: int
    sync: Callable[[Any], None]
    on_timed_start: Callable[[], None] = lambda: None
    warmup_s: list[float] = field(default_factory=list)
    timed_s: list[float] = field(default_factory=list)
    first_out: Any = None
    last_out: Any = None
    _last: float = 0.0

    @property
    def total_calls(self) -> int:
        return self.warmup_calls + self.timed_calls

    @property
    def done(self) -> bool:
        return len(self.timed_s) >= self.timed_calls

    def start(self) -> None:
        self._last = time.perf_counter()

    def tick(self, out: Any = None) -> None:
        self.sync(out)
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        if len(self.warmup_s) < self.warmup_calls:
            self.warmup_s.append(elapsed)
            if len(self.warmup_s) == 1:
                self.first_out = out
            if len(self.warmup_s) == self.warmup_calls:
                self.on_timed_start()
                self._last = time.perf_counter()  # the hook's own time is not a step's
        else:
            self.timed_s.append(elapsed)
            self.last_out = out


def run_loop(bench: Bench, clock: StepClock) -> None:
    """Drive a step-based bench through warm-up and timed calls."""
    if bench.drive is not None:
        clock.start()
        bench.drive(clock)
        return
    step = bench.step
    clock.start()
    for _ in range(clock.total_calls):
        clock.tick(step())
