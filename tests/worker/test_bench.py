"""The worker's clock (runner/worker/bench.py) on a deliberately asynchronous fake device.

The fake device is a thread that runs queued "kernels" (sleeps of KERNEL_S) in order; a step only
enqueues one and returns at once, as CUDA or JAX dispatch does; synchronising waits for the
kernel and costs SYNC_S on top (the dispatch latency a per-step synchronisation adds to every
step). Checked: the clock cannot be fooled (a sample never reads the dispatch time), block
samples drop the per-step synchronisation cost, steps = "auto" fills its window, and a stall
inside the window is flagged as an outlier with its index.
"""

from __future__ import annotations

import gc
import queue
import statistics
import threading
import time
import weakref

import pytest

from runner.worker.bench import (Bench, StepClock, calibration_schedule, preroll_calls,
                                 run_loop)

KERNEL_S = 0.002
SYNC_S = 0.002


class FakeDevice:
    def __init__(self):
        self.work: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.stall_at: int | None = None
        self.stall_s = 0.1
        self.launched = 0

    def _run(self) -> None:
        while True:
            duration, done = self.work.get()
            time.sleep(duration)
            done.set()

    def step(self) -> threading.Event:
        """Enqueue one kernel and return at once (asynchronous dispatch)."""
        done = threading.Event()
        stall = self.stall_at is not None and self.launched == self.stall_at
        self.work.put((self.stall_s if stall else KERNEL_S, done))
        self.launched += 1
        return done

    @staticmethod
    def sync(handle: threading.Event | None) -> None:
        if handle is not None:
            handle.wait()
            time.sleep(SYNC_S)


def measure(device: FakeDevice, *, per_step: bool, steps: int | None = 40, **clock) -> StepClock:
    bench = Bench(items_per_step=1, step=device.step, sync=device.sync)
    clock_ = StepClock(warmup_calls=2, timed_calls=steps, sync=device.sync, **clock)
    if per_step:
        clock_.calibrate = lambda: 1          # every step synchronised, as before block samples
    run_loop(bench, clock_)
    return clock_


def per_step_ms(clock: StepClock) -> list[float]:
    return [t * 1000 / clock.calls_per_sample for t in clock.timed_s]


def test_dispatch_alone_is_far_cheaper_than_the_kernel():
    """What a clock that did not synchronise would read.

    The fastest of several dispatches: on a loaded machine one enqueue can wait a whole GIL
    switch interval for the device thread (CI once read 2.0 ms), which says nothing about
    dispatch being asynchronous.
    """
    device = FakeDevice()
    dispatches = []
    for _ in range(20):
        started = time.perf_counter()
        handle = device.step()
        dispatches.append(time.perf_counter() - started)
        device.sync(handle)
    assert min(dispatches) < KERNEL_S / 10


def test_the_clock_cannot_be_fooled_by_asynchronous_dispatch():
    for per_step in (True, False):
        clock = measure(FakeDevice(), per_step=per_step)
        # Every sample covers its kernels' whole run, never just their dispatch.
        assert min(per_step_ms(clock)) >= KERNEL_S * 1000 * 0.95


def test_block_samples_drop_the_per_step_synchronisation_cost():
    synced = measure(FakeDevice(), per_step=True)
    blocked = measure(FakeDevice(), per_step=False)
    assert synced.calls_per_sample == 1
    assert blocked.calls_per_sample >= 4      # 4 kernels + one sync last >= 10 ms
    synced_ms = statistics.median(per_step_ms(synced))
    blocked_ms = statistics.median(per_step_ms(blocked))
    assert synced_ms >= (KERNEL_S + SYNC_S) * 1000 * 0.95
    # The sync is paid once per block: per step it costs SYNC_S / calls_per_sample.
    assert blocked_ms < synced_ms - SYNC_S * 1000 * 0.5
    assert blocked_ms >= KERNEL_S * 1000 * 0.95
    # A fixed step count is honoured in whole blocks, and still gives min_samples samples.
    assert len(blocked.timed_s) * blocked.calls_per_sample >= 40
    assert len(blocked.timed_s) >= 10 and blocked.calls_per_sample == 4


def test_auto_steps_fill_the_minimum_window_with_enough_samples():
    clock = measure(FakeDevice(), per_step=False, steps=None, min_time_s=0.3, max_time_s=5.0)
    assert clock.timed_window_s >= 0.3
    assert len(clock.timed_s) >= 10
    assert clock.timed_window_s < 1.0         # and stops soon after


def test_auto_steps_stop_at_the_maximum_window():
    clock = measure(FakeDevice(), per_step=True, steps=None, min_time_s=30.0, max_time_s=0.2)
    assert 0.2 <= clock.timed_window_s < 0.5   # min_time 30 s is not waited for


def test_a_stall_inside_the_window_is_an_outlier_with_its_index():
    device = FakeDevice()
    device.stall_at = 2 + 5                    # two warm-up calls, then the sixth timed one
    # Half a second: on a loaded machine (two test workers on two cores) a 1 ms sleep reads up
    # to ~15 ms, and a stall must stand 10× the median call above it.
    device.stall_s = 0.5
    clock = measure(device, per_step=True, steps=20)
    assert [index for index, _ in clock.outliers()] == [5]
    assert clock.outliers()[0][1] >= 0.1


@pytest.mark.parametrize("steps", [None, 7])
def test_host_returning_steps_are_timed_call_by_call(steps):
    device = FakeDevice()

    def blocking_step():
        handle = device.step()
        device.sync(handle)                    # the result is copied to the host
        return None

    bench = Bench(items_per_step=1, step=blocking_step, returns_to_host=True)
    clock = StepClock(warmup_calls=1, timed_calls=steps, sync=lambda out: None,
                      min_time_s=0.05, max_time_s=1.0)
    run_loop(bench, clock)
    assert clock.calls_per_sample == 1 and "block_calibration" not in bench.extra
    if steps:
        assert len(clock.timed_s) == steps


def test_samples_that_start_a_new_epoch_are_tagged():
    """5 calls per epoch, 2 warm-up calls (0-1), blocks of 4: calls 2-5 | 6-9 | 10-13 | 14-17;
    epochs start at calls 5, 10, 15: in samples 0, 2 and 3."""
    device = FakeDevice()
    bench = Bench(items_per_step=1, step=device.step, sync=device.sync, calls_per_epoch=5)
    clock = StepClock(warmup_calls=2, timed_calls=16, sync=device.sync, epoch_calls=5)
    clock.calibrate = lambda: 4
    run_loop(bench, clock)
    assert clock.calls_per_sample == 4 and len(clock.timed_s) == 4
    assert clock.epoch_boundaries == [0, 2, 3]


def test_calibration_calls_count_towards_the_epoch():
    device = FakeDevice()
    bench = Bench(items_per_step=1, step=device.step, sync=device.sync)
    clock = StepClock(warmup_calls=1, timed_calls=8, sync=device.sync, epoch_calls=1000)
    run_loop(bench, clock)
    trials = sum(c for c, _ in bench.extra["block_calibration"])
    assert clock.calls == 1 + trials + len(clock.timed_s) * clock.calls_per_sample


@pytest.mark.parametrize("keep_outputs", [False, True])
def test_a_loop_without_a_loss_holds_no_output_between_steps(keep_outputs):
    """As a bare loop: each step's output is released before the next step runs (a held output
    keeps one more buffer alive, and changes what the allocator does on every step)."""
    class Output:
        pass

    alive_at_step: list[int] = []
    outputs: weakref.WeakSet = weakref.WeakSet()

    def step():
        # Output holds no reference cycle: it dies when its last reference goes, so counting the
        # live ones needs no collection pass (a full gc.collect per step took 30 s here).
        alive_at_step.append(len(outputs))
        out = Output()
        outputs.add(out)
        return out

    bench = Bench(items_per_step=1, step=step)
    clock = StepClock(warmup_calls=2, timed_calls=40, sync=lambda out: None,
                      keep_outputs=keep_outputs)
    clock.calibrate = lambda: 4
    run_loop(bench, clock)
    timed = alive_at_step[2:]
    if keep_outputs:       # the first output (for the loss) and the last sample's
        assert clock.first_out is not None and clock.last_out is not None
        assert max(timed) == 2
    else:
        assert clock.first_out is None and clock.last_out is None
        assert max(timed) == 0


def test_gc_is_off_in_the_timed_window_and_back_on_after():
    """As timeit and torch.utils.benchmark: no collection pass lands inside a timed sample."""
    seen: list[bool] = []

    def step():
        seen.append(gc.isenabled())
        return None

    assert gc.isenabled()
    bench = Bench(items_per_step=1, step=step)
    clock = StepClock(warmup_calls=2, timed_calls=12, sync=lambda out: None)
    clock.calibrate = lambda: 3
    run_loop(bench, clock)
    assert seen[:2] == [True, True]                   # warm-up: as the plain loop runs
    assert not any(seen[2:]) and len(seen) == 14      # every timed call
    assert gc.isenabled() and clock.gc_in_timed_window == "disabled"


def test_gc_comes_back_when_the_loop_fails():
    calls = iter(range(100))

    def step():
        if next(calls) == 5:
            raise RuntimeError("device lost")

    clock = StepClock(warmup_calls=1, timed_calls=20, sync=lambda out: None)
    clock.calibrate = lambda: 1
    with pytest.raises(RuntimeError):
        run_loop(Bench(items_per_step=1, step=step), clock)
    assert not gc.isenabled()                          # the window was open ...
    clock.end_timed()                                  # ... the worker closes it (timed_window)
    assert gc.isenabled()


def test_the_timed_end_hook_runs_once_at_the_last_sample():
    ends: list[int] = []
    clock = StepClock(warmup_calls=1, timed_calls=6, sync=lambda out: None,
                      on_timed_end=lambda: ends.append(len(clock.timed_s)))
    clock.calibrate = lambda: 2
    run_loop(Bench(items_per_step=1, step=lambda: None), clock)
    clock.end_timed()
    assert ends == [3]


def test_a_handed_over_block_size_is_used_and_never_calibrated_again():
    """The cell's later repeats take the block size its first repeat calibrated (pyperf hands
    its loop count to every worker): no calibration trials, every sample that many calls."""
    device = FakeDevice()
    first = Bench(items_per_step=1, step=device.step, sync=device.sync)
    calibrated = StepClock(warmup_calls=2, timed_calls=200, sync=device.sync)
    run_loop(first, calibrated)
    assert calibrated.block_source == "calibrated" and calibrated.calls_per_sample > 1
    assert "block_calibration" in first.extra

    later = Bench(items_per_step=1, step=device.step, sync=device.sync)
    handed = StepClock(warmup_calls=2, timed_calls=200, sync=device.sync,
                       calls_per_sample=calibrated.calls_per_sample, block_source="handed_over")
    run_loop(later, handed)
    assert handed.calls_per_sample == calibrated.calls_per_sample
    assert handed.block_source == "handed_over" and "block_calibration" not in later.extra
    # No search, but its blocks again as the pre-roll (one pre-roll for every repeat).
    preroll = preroll_calls(handed.calls_per_sample)
    assert handed.calls == 2 + preroll + len(handed.timed_s) * handed.calls_per_sample
    assert len(handed.timed_s) == len(calibrated.timed_s)                      # equal weight


# --- one pre-roll for every repeat (issue 37) ----------------------------------------------------

class Counted:
    """A synchronous step of `seconds` (sleep) that counts its calls and the calls made before
    the timed window opened (GC goes off exactly there)."""

    def __init__(self, seconds: float):
        self.seconds, self.calls, self.before_window = seconds, 0, None

    def step(self) -> None:
        if self.before_window is None and not gc.isenabled():
            self.before_window = self.calls
        self.calls += 1
        time.sleep(self.seconds)


def untimed_calls(step_s: float, timed_calls: int | None, handed: int | None = None) -> tuple:
    counted = Counted(step_s)
    bench = Bench(items_per_step=1, step=counted.step)
    clock = StepClock(warmup_calls=2, timed_calls=timed_calls, sync=lambda out: None,
                      min_time_s=0.05, max_time_s=1.0, calls_per_sample=handed or 1,
                      block_source="handed_over" if handed else "per_call")
    run_loop(bench, clock)
    return counted.before_window, clock.calls_per_sample, bench.extra.get("preroll_calls")


@pytest.mark.parametrize("timed_calls", [None, 40])
def test_every_repeat_makes_the_same_untimed_calls_before_its_window(timed_calls):
    """The repeat that calibrates its block ran the calibration's blocks (1, 1, 2, 2, 4, 4, ...)
    untimed; one handed that block started timing right after its warm-up. Now it runs the same
    blocks as its pre-roll: the same calls before every repeat's window."""
    first, block, preroll = untimed_calls(0.003, timed_calls)
    assert block >= 2 and first == 2 + preroll == 2 + preroll_calls(block)
    later, handed_block, handed_preroll = untimed_calls(0.003, timed_calls, handed=block)
    assert handed_block == block and (later, handed_preroll) == (first, preroll)


def test_a_capped_block_is_where_the_calibration_stops():
    """A fixed step count caps the block (timed_calls / min_samples): the search stops at the cap
    instead of searching beyond it and cutting back, so its calls are the pre-roll of that
    block (before: blocks of 2 chosen after trials up to 16, 62 untimed calls against 6)."""
    first, block, preroll = untimed_calls(0.0005, 20)
    assert block == 2 and preroll == sum(calibration_schedule(2)) == 6 and first == 8


def test_the_calibration_schedule():
    assert calibration_schedule(1) == [1, 1]
    assert calibration_schedule(8) == [1, 1, 2, 2, 4, 4, 8, 8]
    assert calibration_schedule(10) == [1, 1, 2, 2, 4, 4, 8, 8, 10, 10]
    assert preroll_calls(8) == 30


def test_a_bench_with_neither_a_step_nor_a_drive_says_so():
    clock = StepClock(warmup_calls=1, timed_calls=2, sync=lambda out: None)
    with pytest.raises(TypeError, match="neither a step nor a drive"):
        run_loop(Bench(items_per_step=1), clock)


# --- a frozen bad calibration (issue 49) ---------------------------------------------------------

def test_a_handed_block_that_no_longer_meets_its_target_is_reported():
    """A first repeat disturbed by a stall calibrated a block of 1 call for a 0.5 ms step and
    handed it to every repeat (seen: 150 per-call samples). The repeat now says its block is far
    under the 10 ms target (the host warns on it); a block that meets it, a block the fixed
    step count capped and a step timed call by call by design say nothing."""
    from runner.worker.bench import BLOCK_TARGET_S, short_block

    def repeat(handed: int | None, timed_calls: int | None) -> StepClock:
        bench = Bench(items_per_step=1, step=Counted(0.0005).step)
        clock = StepClock(warmup_calls=1, timed_calls=timed_calls, sync=lambda out: None,
                          min_time_s=0.05, max_time_s=1.0, calls_per_sample=handed or 1,
                          block_source="handed_over" if handed else "per_call")
        run_loop(bench, clock)
        return clock

    frozen = repeat(1, None)
    found = short_block(frozen)
    assert found is not None and found["calls_per_sample"] == 1
    assert found["median_sample_ms"] < BLOCK_TARGET_S * 1000 / 4 == found["target_ms"] / 4
    assert short_block(repeat(None, None)) is None           # calibrated: ≥ 10 ms a block
    assert short_block(repeat(1, 10)) is None                # 10 steps: the cap is 1 call
    assert short_block(frozen, returns_to_host=True) is None


def test_a_stall_inside_a_block_is_an_outlier():
    """Before: the outlier rule compared a block's time with 10× the median block, so a 50 ms
    stall of one call (25× its 2 ms) in a block of 4 to 8 calls (a block 3–6× the median) went
    unseen. (The loaded machine may add stalls of its own: they are outliers too.)"""
    device = FakeDevice()
    device.stall_at, device.stall_s = 150, 0.05
    clock = measure(device, per_step=False, steps=240)
    assert clock.calls_per_sample >= 4
    stalls = [t for _, t in clock.outliers() if t >= 0.05]
    assert len(stalls) == 1 and stalls[0] < 10 * statistics.median(clock.timed_s)


def test_the_spread_of_large_blocks_is_no_stall():
    """Blocks of 1024 calls whose spread (1 %) is far above 9/1024 of a block: no outlier until
    a block holds a stall beyond that spread."""
    import random

    rng = random.Random(0)
    clock = StepClock(warmup_calls=0, timed_calls=None, sync=lambda out: None,
                      calls_per_sample=1024)
    clock.timed_s = [1.0 + rng.gauss(0, 0.01) for _ in range(200)]
    assert clock.outliers() == []
    clock.timed_s[7] += 0.2                  # one call of 200× the median call (~1 ms)
    assert [i for i, _ in clock.outliers()] == [7]


class Ranks:
    """Two ranks' clock agreement (StepClock.agree) as a DDP cell's all-reduce does it: each
    rank posts its reading, both wait for the other, both take rank 0's."""

    def __init__(self):
        self.barrier = threading.Barrier(2)
        self.posted = [0.0, 0.0]

    def agree(self, rank: int):
        def agreed(seconds: float) -> float:
            self.posted[rank] = seconds
            self.barrier.wait()
            value = self.posted[0]
            self.barrier.wait()
            return value
        return agreed


def test_every_rank_takes_rank_0s_readings_and_makes_the_same_calls():
    """A slower rank 1 alone would calibrate a smaller block and end its window after other
    calls; agreeing on rank 0's readings, both make every decision the same way (steps = auto,
    the block calibrated), which their collectives need."""
    ranks, clocks, calls = Ranks(), {}, {0: 0, 1: 0}

    def run(rank: int) -> None:
        device = FakeDevice()

        def step():
            calls[rank] += 1
            if rank == 1:
                time.sleep(0.004)            # this rank's host is slower
            return device.step()

        bench = Bench(items_per_step=1, step=step, sync=device.sync)
        clocks[rank] = StepClock(warmup_calls=2, timed_calls=None, sync=device.sync,
                                 min_time_s=0.2, max_time_s=2.0, agree=ranks.agree(rank))
        run_loop(bench, clocks[rank])

    threads = [threading.Thread(target=run, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert clocks[0].timed_s == clocks[1].timed_s and clocks[0].warmup_s == clocks[1].warmup_s
    assert clocks[0].calls_per_sample == clocks[1].calls_per_sample
    assert calls[0] == calls[1] and clocks[0].calls == clocks[1].calls
