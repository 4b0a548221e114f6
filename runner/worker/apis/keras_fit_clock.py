"""Timing Keras `model.fit` (Keras 3 on every backend, and Keras 2) without changing what fit does.

A callback is the only way into fit's loop, and Keras decides how to run its loop from the
callbacks it is given:
- Keras 3's CallbackList dispatches batch-end hooks asynchronously (in a thread pool) unless a
  callback overrides `on_train_batch_end` / `on_batch_end` and is not marked `async_safe`; a
  callback that then reads `logs["loss"]` waits for the device on every call. The old clock did
  both: every call synchronised, while a plain fit overlaps them.
- Keras 2 calls batch hooks only when a callback implements them, and converts the logs to
  NumPy (a device wait) unless every such callback sets `_supports_tf_logs`.

BlockClock therefore (1) reads the clock in `on_train_batch_begin`, which Keras 3 always calls
synchronously and which does not enter the async decision, and only at the end of a block of
calls, where it synchronises the device once (as the native loops do); (2) keeps the running
loss from `on_train_batch_end`, marked `async_safe` (Keras 3 has already made the logs host
values in its own batch-end thread, as a plain fit does) and `_supports_tf_logs` (Keras 2 hands
it the tensors, which are read after fit). One fit runs the warm-up, the block calibration (as
bench.calibrate_block: the smallest power of two of calls lasting BLOCK_TARGET_S, each size
tried twice) or, with a block handed over, the same blocks as its pre-roll (so every repeat
makes the same untimed calls before its window), and the timed blocks, through fit's own data
pipeline and epochs.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any
from collections.abc import Callable

from ..bench import BLOCK_TARGET_S, MAX_CALLS_PER_SAMPLE, StepClock, block_cap
from .. import catalog
from . import FrameworkBase, KerasFramework

TIMING = ("one train-function call (steps_per_execution steps) inside model.fit, whose loop, data "
          "pipeline and batch-end dispatch run as in a plain fit (the clock's callback reads the "
          "clock in on_train_batch_begin at block ends only; its batch-end hook is async-safe); "
          "divided by steps_per_execution. compile_s is the first call; fit's own set-up before "
          "it is extra.fit_setup_s")
CALLBACK = ("BlockClock: on_train_batch_begin reads the clock at block ends (device synchronised "
            "there); on_train_batch_end (async_safe, tensors as they are) keeps the running loss")
# Calls a calibration can use at most: two trials of each power of two up to the cap.
CALIBRATION_CALLS_BOUND = 4 * MAX_CALLS_PER_SAMPLE


def state_sync(fw: FrameworkBase | KerasFramework, model: Any, backend: str) -> Callable[[Any], None]:
    """Wait for the device to finish the calls dispatched so far. torch and TensorFlow wait for
    the whole device; JAX waits on arrays, here the newest training state (fit keeps it in
    model._jax_state between calls, and in the variables after each epoch)."""
    engine = catalog.ENGINES.get(backend)
    if engine is None or not engine.waits_on_arrays:
        return lambda out: fw.sync(None)

    def sync(out: Any) -> None:
        state = getattr(model, "_jax_state", None)
        # Keras tracks the attribute (a TrackedDict of TrackedLists), which JAX does not see
        # into: the arrays are handed over as a plain list.
        arrays = [a for group in state.values() for a in (group or ())] if state else \
            [v.value for v in model.variables]
        fw.sync(arrays)

    return sync


def dispatch_facts(keras: Any) -> dict[str, Any]:
    """What fit is told about its callbacks: Keras 3's async batch-end decision for a list
    holding BlockClock, and the same for no callback at all (a plain fit)."""
    facts: dict[str, Any] = {"fit_callbacks": CALLBACK}
    callback_list = getattr(keras.callbacks, "CallbackList", None)
    if callback_list is None:
        return facts
    probe = block_clock(keras, None, per_call=1, given=None, calibration={})
    try:
        with_clock = callback_list([probe])
        plain = callback_list([])
    except Exception:            # Keras 2's CallbackList needs more; its decision is below
        return facts
    if hasattr(with_clock, "_async_train"):                    # Keras 3
        facts["keras_async_batch_end"] = bool(with_clock._async_train)
        facts["keras_async_batch_end_plain_fit"] = bool(plain._async_train)
    if hasattr(with_clock, "_batch_hooks_support_tf_logs"):    # Keras 2
        facts["keras2_batch_logs_converted"] = not with_clock._batch_hooks_support_tf_logs
    return facts


def fit_drive(keras: Any, model: Any, fit_args: dict[str, Any], *, per_call: int,
              steps_per_epoch: int, extra: dict[str, Any],
              after: Callable[[StepClock], None] | None = None) -> Callable[[StepClock], None]:
    """A Bench's drive for a compiled Keras model: one model.fit (`fit_args`: its data) runs the
    warm-up, the block calibration and the timed blocks under BlockClock, then says in `extra`
    how the block was chosen and what came before the window; `after(clock)` adds what the
    workload derives from the filled clock."""
    calibration: dict[str, Any] = {}

    def drive(clock: StepClock) -> None:
        handed = clock.calls_per_sample if clock.block_source == "handed_over" else None
        callback = block_clock(keras, clock, per_call=per_call, given=handed,
                               calibration=calibration)
        epochs = math.ceil(calls_bound(clock) * per_call / steps_per_epoch) + 1
        model.fit(**fit_args, epochs=epochs, verbose=0, callbacks=[callback])
        clock.first_out, clock.last_out = callback.losses.first(), callback.losses.last_timed()
        if after is not None:
            after(clock)
        if calibration.get("trials"):
            extra["block_calibration"] = calibration["trials"]
        extra["preroll_calls"] = calibration.get("preroll_calls")
        extra["fit_setup_s"] = calibration.get("fit_setup_s")

    return drive


def calls_bound(clock: StepClock) -> int:
    """Calls the fit may need at most (it stops as soon as the clock is done)."""
    timed = clock.timed_calls if clock.timed_calls is not None else 10_000_000
    return clock.warmup_calls + CALIBRATION_CALLS_BOUND + timed + 1


class RunningLosses:
    """Keras' logs["loss"] is the running mean over the epoch's steps so far; a call's own loss
    is unwound from two consecutive running means. Only the first call's and the newest few
    are kept (the loop may run for minutes). Keras 3 records them from its batch-end threads."""

    KEEP = 6

    def __init__(self, per_call: int):
        self.per_call = per_call
        self.first_key = (0, per_call - 1)                   # the first call's end step
        self.calls: dict[int, tuple[int, int]] = {}          # call number → (epoch, end step)
        self.running: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self.timed_last: int | None = None
        self._lock = threading.Lock()

    def begin(self, call: int, epoch: int, begin_step: int) -> None:
        self.calls[call] = (epoch, begin_step + self.per_call - 1)
        stale = call - self.KEEP
        if stale != 1:                                       # the first call's is kept
            self.calls.pop(stale, None)

    def end(self, epoch: int, end_step: int, loss: Any) -> None:
        with self._lock:
            self.running[(epoch, end_step)] = loss
            newer = [key for key in self.running if key != self.first_key]
            for key in newer[:-self.KEEP]:
                del self.running[key]

    def of_call(self, call: int | None) -> float | None:
        if call is None or call not in self.calls:
            return None
        epoch, end = self.calls[call]
        if (epoch, end) not in self.running:
            return None
        mean = float(self.running[(epoch, end)])
        steps = end + 1
        if steps <= self.per_call:
            return mean
        before = self.running.get((epoch, end - self.per_call))
        if before is None:
            return None
        return (mean * steps - float(before) * (steps - self.per_call)) / self.per_call

    def first(self) -> float | None:
        return self.of_call(1)

    def last_timed(self) -> float | None:
        return self.of_call(self.timed_last)


def block_clock(keras: Any, clock: StepClock | None, *, per_call: int, given: int | None,
                calibration: dict[str, Any]) -> Any:
    """The callback for one fit (clock None: a probe for dispatch_facts). It synchronises the
    device through clock.sync (the bench's state_sync)."""

    class BlockClock(BlockClockHooks, keras.callbacks.Callback):
        pass

    return BlockClock(clock, per_call, given, calibration)


class BlockClockHooks:
    """BlockClock's hooks, made a callback of the Keras in use by block_clock."""

    async_safe = True           # Keras 3: the batch-end hook below is safe in its thread pool
    model: Any                  # set by Keras (the model being fitted)

    def __init__(self, clock: StepClock | None, per_call: int, given: int | None,
                 calibration: dict[str, Any]):
        super().__init__()
        self._supports_tf_logs = True   # Keras 2: no NumPy conversion of logs per batch
        self.clock, self.given, self.calibration = clock, given, calibration
        self.calls = 0                  # train-function calls started so far
        self.epoch = 0
        self.losses = RunningLosses(per_call)
        self.phase = "warmup"
        self.trials: list[list[float]] = []
        self.trial_calls = 1
        self.trial_end = 0
        self.cap = MAX_CALLS_PER_SAMPLE   # the largest block tried (a handed block: that block)
        self.mark = 0.0
        self.timed_from = 0
        if clock is not None:
            # The hooks open the timed window themselves (start_timed), after the calibration
            # or pre-roll: not the warm-up's last tick, which would open it twice (telemetry
            # started twice, GC left off after the window).
            clock.defer_timed_start = True
            # fit's epoch-end work runs after an epoch's last call, before the next batch begins.
            clock.epoch_work_after_last_call = True

    @property
    def timed(self) -> StepClock:
        """The clock the hooks tick (every BlockClock has one but dispatch_facts' probe, whose
        hooks fit never calls)."""
        if self.clock is None:
            raise RuntimeError("a probe BlockClock has no clock to tick")
        return self.clock

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.clock is not None:
            if self.calls:
                self.after(self.calls)
            else:
                # fit's own set-up (data adapter, callbacks, train function wrapper) is no call:
                # compile_s is the first call, as a native loop's (its set-up kept apart).
                self.calibration["fit_setup_s"] = self.clock.restart()
        self.calls += 1
        self.losses.begin(self.calls, self.epoch, batch)

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            self.losses.end(self.epoch, batch, logs["loss"])

    def after(self, done: int) -> None:
        """`done` calls have been dispatched, the next one not yet: the end of a block?"""
        clock = self.timed
        if self.phase == "warmup":
            clock.tick(None)
            if done == clock.warmup_calls:
                self.start_calibration(done)
        elif self.phase == "calibrate":
            if done == self.trial_end:
                self.end_trial(done)
        elif self.phase == "timed":
            if (done - self.timed_from) % clock.calls_per_sample == 0:
                clock.tick(None, clock.calls_per_sample)
                if clock.done:
                    self.losses.timed_last = done
                    self.phase = "over"
                    self.model.stop_training = True

    def start_calibration(self, done: int) -> None:
        """After the warm-up: the block calibration, or, with a block handed over, the same
        blocks as its pre-roll (bench.calibration_schedule), so that every repeat makes the
        same untimed calls before its window."""
        self.cap = int(self.given) if self.given else block_cap(self.timed)
        self.phase, self.trial_calls = "calibrate", 1
        self.trial_end, self.mark = done + 1, time.perf_counter()

    def end_trial(self, done: int) -> None:
        clock = self.timed
        clock.sync(None)
        now = time.perf_counter()
        self.trials.append([self.trial_calls, round(now - self.mark, 6)])
        clock.calls += self.trial_calls               # they consumed batches too
        self.mark = now
        pair = [t for c, t in self.trials if c == self.trial_calls]
        if len(pair) < 2:
            self.trial_end = done + self.trial_calls
            return
        long_enough = not self.given and min(pair) >= BLOCK_TARGET_S
        if long_enough or self.trial_calls >= self.cap:
            self.calibration["preroll_calls"] = sum(c for c, _ in self.trials)
            if not self.given:
                self.calibration["trials"] = self.trials
                clock.block_source = "calibrated"
            self.start_timed(done, self.trial_calls)
            return
        self.trial_calls = min(2 * self.trial_calls, self.cap)
        self.trial_end = done + self.trial_calls

    def capped(self, calls: int) -> int:
        """A fixed step count still yields min_samples samples where it can (bench.block_cap)."""
        return min(calls, block_cap(self.timed))

    def start_timed(self, done: int, calls: int) -> None:
        self.timed.calls_per_sample = calls
        self.timed.begin_timed()
        self.phase, self.timed_from = "timed", done
