"""What every workload module returns, and the one timed loop that measures it.

A workload module (runner/worker/apis/<api>_api/<workload>.py) exposes
`build(spec: CellSpec, fw: Framework) -> Bench`. The worker then either calls `bench.step()`
repeatedly (the usual case), or hands a `StepClock` to `bench.drive` when the framework owns
the loop (Keras `model.fit`, whose callback reads the clock once per block of calls).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable


@dataclass
class Bench:
    items_per_step: float                             # samples (or elements) per step
    step: Callable[[], Any] | None = None             # one call = steps_per_call steps
    drive: Callable[[StepClock], None] | None = None  # framework-owned loop: ticks the clock
    sync: Callable[[Any], None] = lambda out: None    # wait until the device finished `out`
    loss: Callable[[Any], float] | None = None        # loss from a step's output
    evaluate: Callable[[], dict[str, Any]] | None = None  # after the loop (accuracy, ...)
    steps_per_call: int = 1
    # True where step() already waits for the device and copies its result to the host (Keras
    # train_on_batch / predict_on_batch, generate): those are timed call by call.
    returns_to_host: bool = False
    # Calls per pass over the training data, where the workload has epochs: a timed sample that
    # contains the first call of a new epoch (iterator rebuild, reshuffle) is tagged.
    calls_per_epoch: int | None = None
    flops_per_step: float | None = None
    # What one call is. The worker prefixes how calls were timed ("blocks of N calls ...")
    # unless the call returns to the host by itself (timed call by call).
    timing: str = "one step() call"
    effective: dict[str, Any] = field(default_factory=dict)  # axis values in effect
    extra: dict[str, Any] = field(default_factory=dict)
    # The answer (apis/answers.py): a fingerprint of what the step computes on the seeded
    # inputs, called once after the timed loop (never timed); and whether the first step's loss
    # belongs to it (loops that see the same first batch in every API).
    answer: Callable[[], dict[str, Any]] | None = None
    first_loss_in_answer: bool = False

    def call_step(self) -> Any:
        """One more call of step() outside the timed loop (an answer's output)."""
        if self.step is None:
            raise TypeError("a bench whose loop the framework drives has no step() to call")
        return self.step()


# Block samples: a sample times this many consecutive calls with one device synchronisation at
# its end, chosen so that a sample lasts at least BLOCK_TARGET_S: the synchronisation's own cost
# (the dispatch latency a per-call sync adds to every call) is then spread over the block.
BLOCK_TARGET_S = 0.01
MAX_CALLS_PER_SAMPLE = 1024
# Under steps = "auto": the timed window runs until it holds MIN_SAMPLES samples and lasts
# min_time_s, or until max_time_s (whichever comes first once one sample is in).
MIN_SAMPLES = 10
# A timed sample that holds one call this many times the median call is an outlier (a
# recompilation, a stall): counted and reported with its index, never removed (outliers()).
OUTLIER_FACTOR = 10.0
# ... and, in a block of calls, stands this many robust deviations (1.4826 × MAD) above the median.
NOISE_MADS = 5.0


@dataclass
class StepClock:
    """Times consecutive calls: each tick synchronises the device on the call's output, reads the
    clock, and files the interval since the previous tick as a warm-up or a timed sample.
    Intervals are contiguous, so the timed samples add up to the timed window exactly.

    A timed sample covers `calls_per_sample` calls (1 unless the loop calibrated blocks). With
    `timed_calls` None (steps = "auto") the window ends by the time rule instead of a count."""

    warmup_calls: int
    timed_calls: int | None
    sync: Callable[[Any], None]
    on_timed_start: Callable[[], object] = lambda: None
    # Called once, the moment the last timed sample is filed and before anything else runs (the
    # telemetry's end read: its window is then the timed samples' window, not what follows).
    on_timed_end: Callable[[], None] = lambda: None
    # A loop that calibrates its own blocks (Keras fit) starts the timed window itself with
    # begin_timed() instead of at the last warm-up tick.
    defer_timed_start: bool = False
    # Python's cyclic garbage collector is off during the timed samples (as timeit and
    # torch.utils.benchmark do): a collection pass landing in one sample is the harness's
    # stall, not the step's. Restored when the window ends.
    disable_gc: bool = True
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    min_samples: int = MIN_SAMPLES
    calls_per_sample: int = 1
    # How calls_per_sample was chosen (the record's block_source): "handed_over" when the spec
    # gave it (the cell's first repeat calibrated it): then nothing calibrates it again.
    block_source: str = "per_call"
    # Called once, between the last warm-up call and the first timed one: returns the calls per
    # sample (the step-based loop's block calibration, or a handed block's pre-roll); its time
    # is not a step's.
    calibrate: Callable[[], int] | None = None
    epoch_calls: int | None = None
    # Where a loop does its epoch-end work (the next epoch's order, iterator, callbacks): False,
    # inside the first call of the next epoch (the native loops draw the new order there); True,
    # after an epoch's last call and before the clock's next read (Keras fit: on_epoch_end and
    # the next epoch's iterator, before the next on_train_batch_begin), so in the sample that
    # holds the epoch's last call. epoch_boundaries lists the samples holding that work.
    epoch_work_after_last_call: bool = False
    # Keep the first and the last call's output (for a loss). Off, the loop holds no output
    # between samples, as a bare loop: a held output keeps one more buffer alive, which changes
    # what the allocator does on every step (measured: torch's 512² CPU matmul 5 % slower).
    keep_outputs: bool = True
    # A cell of several processes (torch DDP, one per device; docs/scaling.md): after each read
    # of the clock, every process takes the reading of rank 0 (`agree(seconds)` returns it), so
    # that every rank makes the same decisions (block size, end of the window) and runs the
    # same calls, which their collectives need. The exchange itself is filed in no sample (the
    # clock restarts after it). None: one process.
    agree: Callable[[float], float] | None = None
    warmup_s: list[float] = field(default_factory=list)
    timed_s: list[float] = field(default_factory=list)
    epoch_boundaries: list[int] = field(default_factory=list)   # timed samples that start an epoch
    calls: int = 0                                              # calls made so far (all kinds)
    first_out: Any = None
    last_out: Any = None
    _last: float = 0.0
    _timed_open: bool = False
    _gc_was_enabled: bool = False

    @property
    def timed_window_s(self) -> float:
        return sum(self.timed_s)

    @property
    def calls_bound(self) -> int:
        """An upper bound of the calls still to make, for loops that must size themselves up
        front (Keras fit's epochs); they stop as soon as `done`."""
        if self.timed_calls is not None:
            return self.warmup_calls + self.timed_calls
        return self.warmup_calls + 1_000_000

    @property
    def done(self) -> bool:
        calls = len(self.timed_s) * self.calls_per_sample
        if self.timed_calls is not None:
            return calls >= self.timed_calls
        window = self.timed_window_s
        if not self.timed_s:
            return False
        return (len(self.timed_s) >= self.min_samples and window >= self.min_time_s) \
            or window >= self.max_time_s

    def start(self) -> None:
        self._last = time.perf_counter()

    def restart(self) -> float:
        """Start again now (a framework-owned loop whose own set-up is no call: Keras fit's, before
        its first batch); the seconds since the clock last read, filed nowhere."""
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return elapsed

    def tick(self, out: Any = None, calls: int = 1) -> None:
        """File the interval since the last tick, which covered `calls` calls."""
        self.sync(out)
        now = time.perf_counter()
        elapsed = now - self._last
        if self.agree is not None:
            elapsed = self.agree(elapsed)
            now = time.perf_counter()
        self._last = now
        before, self.calls = self.calls, self.calls + calls
        if len(self.warmup_s) < self.warmup_calls:
            self.warmup_s.append(elapsed)
            if len(self.warmup_s) == 1 and self.keep_outputs:
                self.first_out = out
            if len(self.warmup_s) == self.warmup_calls and not self.defer_timed_start:
                self.begin_timed()
        else:
            if self.epoch_calls and self._starts_epoch(before, self.calls):
                self.epoch_boundaries.append(len(self.timed_s))
            self.timed_s.append(elapsed)
            if self.keep_outputs:
                self.last_out = out
            if self.done:
                self.end_timed()

    def begin_timed(self) -> None:
        """Between the last warm-up call and the first timed one: calibrate the block, start the
        telemetry, turn GC off, then restart the clock (none of this is a step)."""
        if self.calibrate is not None:
            self.calls_per_sample = self.calibrate()
            if self.block_source != "handed_over":    # a handed block's pre-roll keeps it
                self.block_source = "calibrated"
        self.on_timed_start()
        self._timed_open = True
        self._gc_was_enabled = gc.isenabled()
        if self.disable_gc:
            gc.disable()
        self._last = time.perf_counter()

    def end_timed(self) -> None:
        """Close the timed window (once): the telemetry's end read, then GC back on. Called by
        the tick that files the last timed sample, and by the worker if the loop fails."""
        if not self._timed_open:
            return
        self._timed_open = False
        try:
            self.on_timed_end()
        finally:
            if self._gc_was_enabled:
                gc.enable()

    @property
    def gc_in_timed_window(self) -> str:
        return "disabled" if self.disable_gc else "enabled"

    def _starts_epoch(self, first: int, end: int) -> bool:
        """Whether the sample of calls [first, end) holds epoch-end work: the first call of an
        epoch after the first one, or (epoch_work_after_last_call) the last call of an epoch."""
        per_epoch = self.epoch_calls
        if not per_epoch:
            return False
        if self.epoch_work_after_last_call:
            first, end = first + 1, end + 1          # a boundary m with first < m ≤ end
        epoch = max(1, -(-first // per_epoch))                 # ceil, at least the second epoch
        return epoch * per_epoch < end

    def outliers(self) -> list[list[float]]:
        """[index, seconds] of every timed sample that holds a stall: one call of it at
        OUTLIER_FACTOR × the median call, or more. A sample of k calls (a block) is their sum,
        so one such call lifts it by (OUTLIER_FACTOR − 1) × the median call: the rule applied
        to the block's mean alone (a block above 10× the median block) needed ten stalls in a
        block of ten. Where the blocks' own spread is wider than that (large blocks), a sample
        must also stand NOISE_MADS robust deviations above the median, so noise is no stall."""
        if len(self.timed_s) < 3:
            return []
        median = statistics.median(self.timed_s)
        spread = statistics.median(abs(t - median) for t in self.timed_s) * 1.4826
        excess = max((OUTLIER_FACTOR - 1) * median / self.calls_per_sample, NOISE_MADS * spread)
        return [[i, t] for i, t in enumerate(self.timed_s) if t - median > excess]


def calibration_schedule(calls: int) -> list[int]:
    """The block sizes a calibration that ends at `calls` tried, in order, each twice: the powers
    of two below it, then itself (blocks of 8: 1, 1, 2, 2, 4, 4, 8, 8; of 10: ..., 8, 8, 10, 10)."""
    sizes, size = [], 1
    while size < calls:
        sizes.append(size)
        size *= 2
    return [size for size in sizes + [calls] for _ in range(2)]


def preroll_calls(calls: int) -> int:
    """Untimed calls between the warm-up and the timed window of every repeat of a cell whose
    block is `calls` calls: those its calibration made (calibration_schedule)."""
    return sum(calibration_schedule(calls))


Agree = Callable[[float], float] | None


def _trial(step: Callable[[], Any], sync: Callable[[Any], None], calls: int,
           agree: Agree = None) -> float:
    """`calls` consecutive calls and one synchronisation at the end: their seconds (rank 0's,
    with `agree`: StepClock.agree)."""
    started = time.perf_counter()
    for _ in range(calls - 1):
        step()
    sync(step())
    took = time.perf_counter() - started
    return agree(took) if agree is not None else took


def calibrate_block(step: Callable[[], Any], sync: Callable[[Any], None],
                    target_s: float = BLOCK_TARGET_S, max_calls: int = MAX_CALLS_PER_SAMPLE,
                    agree: Agree = None) -> tuple[int, list[tuple[int, float]]]:
    """timeit's autorange: the smallest power of two of calls whose synchronised run lasts at
    least target_s, or `max_calls` (a fixed step count's cap: the search never tries more, so
    its calls are calibration_schedule(result) whatever stopped it); returns it and the
    (calls, seconds) trials (untimed extra warm-up). Each size is tried twice and the faster
    counts, so one stall (a preempted thread) cannot end the search at a block too short."""
    calls, trials = 1, []
    max_calls = max(1, min(max_calls, MAX_CALLS_PER_SAMPLE))
    while True:
        elapsed = float("inf")
        for _ in range(2):
            took = _trial(step, sync, calls, agree)
            trials.append((calls, took))
            elapsed = min(elapsed, took)
        if elapsed >= target_s or calls >= max_calls:
            return calls, trials
        calls = min(calls * 2, max_calls)


def preroll(step: Callable[[], Any], sync: Callable[[Any], None],
            calls: int, agree: Agree = None) -> list[tuple[int, float]]:
    """What a repeat handed its block size runs before its timed window: the calls, blocks and
    synchronisations the cell's calibrating repeat ran there (calibration_schedule), so every
    repeat starts its window after the same untimed work (one pre-roll for every repeat)."""
    return [(size, _trial(step, sync, size, agree)) for size in calibration_schedule(calls)]


def block_cap(clock: StepClock) -> int:
    """The largest block a calibration may choose: a fixed step count still yields min_samples
    samples where it can (statistics need samples; a few steps are then synchronised one by
    one)."""
    if clock.timed_calls is None:
        return MAX_CALLS_PER_SAMPLE
    return min(MAX_CALLS_PER_SAMPLE, max(1, clock.timed_calls // clock.min_samples))


# A block whose median sample lasts under this share of BLOCK_TARGET_S (while the block could have
# been larger) was chosen by a disturbed calibration: a stall in its trials made a short block
# look long enough, and handing it over froze it for every repeat of the cell.
SHORT_BLOCK_SHARE = 0.25


def short_block(clock: StepClock, returns_to_host: bool = False) -> dict[str, Any] | None:
    """{"median_sample_ms", "calls_per_sample", "target_ms"} where the cell's block (calibrated
    here or handed over) no longer meets its target: median sample × … under SHORT_BLOCK_SHARE of
    BLOCK_TARGET_S, below the block's cap. None where it does, where the calls are timed one by
    one by design (a step that returns to the host), or where the cap (a fixed step count)
    chose the block. The host warns on it (runner/results/analysis/stats.py)."""
    if returns_to_host or clock.block_source not in ("calibrated", "handed_over") \
            or not clock.timed_s or clock.calls_per_sample >= block_cap(clock):
        return None
    median = statistics.median(clock.timed_s)
    if median >= SHORT_BLOCK_SHARE * BLOCK_TARGET_S:
        return None
    return {"median_sample_ms": median * 1000.0, "calls_per_sample": clock.calls_per_sample,
            "target_ms": BLOCK_TARGET_S * 1000.0}


def run_loop(bench: Bench, clock: StepClock) -> None:
    """Drive a bench through warm-up and timed calls. A step-based bench whose step leaves work
    on the device is timed in calibrated blocks (one synchronisation per block); one whose step
    already returns to the host is timed call by call. Between warm-up and window, every repeat
    of a blocked cell makes the same untimed calls: the calibration's, or (a block handed over)
    the same blocks again as its pre-roll."""
    if bench.drive is not None:
        clock.start()
        bench.drive(clock)
        return
    step = bench.step
    if step is None:
        raise TypeError("the workload's Bench has neither a step nor a drive: nothing to time")
    handed_over = clock.block_source == "handed_over"
    if not bench.returns_to_host and clock.calibrate is None:
        def calibrate() -> int:
            if handed_over:
                trials = preroll(step, clock.sync, clock.calls_per_sample, clock.agree)
                calls = clock.calls_per_sample
            else:
                calls, trials = calibrate_block(step, clock.sync, max_calls=block_cap(clock),
                                                agree=clock.agree)
                bench.extra["block_calibration"] = [[c, round(t, 6)] for c, t in trials]
            bench.extra["preroll_calls"] = sum(c for c, _ in trials)
            clock.calls += sum(c for c, _ in trials)          # they consumed batches too
            return calls
        clock.calibrate = calibrate
    clock.start()
    for _ in range(clock.warmup_calls):
        clock.tick(step())
    while not clock.done:
        for _ in range(clock.calls_per_sample - 1):
            step()
        clock.tick(step(), clock.calls_per_sample)
