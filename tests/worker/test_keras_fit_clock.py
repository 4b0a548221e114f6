"""Keras fit's block clock (runner/worker/apis/keras_fit_clock.py) driven by a fake fit: the hooks
Keras calls, in its order (set-up, then per epoch: batch begin, the call, batch end, and the
epoch's end work before the next epoch's first batch begins), with sleeps for each. No Keras
needed: BlockClockHooks is the callback's whole behaviour (block_clock only mixes in Keras's
Callback class)."""

from __future__ import annotations

import gc
import time
from types import SimpleNamespace

import pytest

from runner.worker.apis.keras_fit_clock import BlockClockHooks
from runner.worker.bench import StepClock, preroll_calls


def fake_fit(hooks: BlockClockHooks, *, epoch_calls: int, call_s: float, setup_s: float = 0.0,
             epoch_end_s: float = 0.0, slow_epoch_end: int | None = None) -> None:
    """fit's loop as the callback sees it; stops when the callback sets stop_training."""
    hooks.model = SimpleNamespace(stop_training=False)
    time.sleep(setup_s)                          # data adapter, callbacks, train function
    for epoch in range(1000):
        hooks.on_epoch_begin(epoch)
        for batch in range(epoch_calls):
            hooks.on_train_batch_begin(batch)
            time.sleep(call_s)
            hooks.on_train_batch_end(batch, {"loss": 1.0})
            if hooks.model.stop_training:
                return
        time.sleep(0.15 if epoch == slow_epoch_end else epoch_end_s)   # on_epoch_end, iterator


def run(*, given: int | None = None, timed_calls: int | None = 24, **fit) -> tuple:
    opened: list[int] = []
    clock = StepClock(warmup_calls=2, timed_calls=timed_calls, sync=lambda out: None,
                      on_timed_start=lambda: opened.append(len(clock.timed_s)),
                      epoch_calls=fit.get("epoch_calls"), min_time_s=0.05, max_time_s=2.0,
                      calls_per_sample=given or 1,
                      block_source="handed_over" if given else "per_call")
    calibration: dict = {}
    hooks = BlockClockHooks(clock, 1, given, calibration)
    clock.start()
    assert gc.isenabled()
    fake_fit(hooks, **fit)
    # The window opened once, after the calibration or pre-roll, and GC is back on after it
    # (before: opened at the warm-up's last tick and again after the calibration, GC left off).
    assert opened == [0] and gc.isenabled()
    return clock, calibration


def test_a_handed_block_runs_the_calibrations_blocks_as_its_pre_roll():
    """Before: the calibrating repeat ran 1, 1, 2, 2, 4, 4 untimed calls (~14) inside fit, a
    repeat handed its block none, so their windows started at different points of fit."""
    first, cal_first = run(epoch_calls=1000, call_s=0.003)
    assert first.block_source == "calibrated" and first.calls_per_sample >= 2
    later, cal_later = run(epoch_calls=1000, call_s=0.003, given=first.calls_per_sample)
    assert later.block_source == "handed_over"
    assert cal_later["preroll_calls"] == cal_first["preroll_calls"] \
        == preroll_calls(first.calls_per_sample)
    timed = len(later.timed_s) * later.calls_per_sample
    assert later.calls - timed == first.calls - len(first.timed_s) * first.calls_per_sample


def test_compile_s_is_the_first_call_not_fits_own_set_up():
    """Native loops' compile_s is their first call; fit's was its set-up too (0.3 s here)."""
    clock, calibration = run(epoch_calls=1000, call_s=0.004, setup_s=0.3)
    assert clock.warmup_s[0] < 0.1
    assert calibration["fit_setup_s"] == pytest.approx(0.3, abs=0.1)


def test_the_epoch_end_work_is_tagged_on_the_sample_that_holds_it():
    """8 calls per epoch, one call per sample: fit's epoch-end work runs after an epoch's last
    call and before the next batch begins, where the clock reads, so it lands in the sample of
    the epoch's last call (issue 37: a 257 ms sample at index 13, tagged 14)."""
    clock, _ = run(epoch_calls=8, call_s=0.01, given=1, timed_calls=30, slow_epoch_end=2)
    slowest = max(range(len(clock.timed_s)), key=clock.timed_s.__getitem__)
    assert clock.timed_s[slowest] > 0.12
    assert slowest in clock.epoch_boundaries
    # 2 warm-up calls and a pre-roll of 2: the first timed call is call 4 (0-based); epochs end
    # after calls 7, 15, 23, 31: the samples of calls 7, 15, 23 and 31 are 3, 11, 19 and 27.
    assert clock.epoch_boundaries == [3, 11, 19, 27]
