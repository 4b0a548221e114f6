"""The CNN's skeleton, the same on every API: what a `cnn` cell makes, measures and reports. Its
numbers (the model's shape, the optimizer's settings, the data, the initial weights, the probe, the
answer's parts) are cnn_common.py's; each API's module (`<api>_api/cnn.py`) is an adapter that
supplies only its model, its step, its logits and its feeds:

- predict: `predictor(spec, fw, data, weights) -> Predictor`: the model with the shared weights,
  its forward pass on the predict batch as a timed Bench (`forward_bench` where the pass is left
  on the device), the parameters the framework counts, the quantization it applied (if any);
- fit: `trainer(spec, fw, data, weights) -> Trainer`: the model with the shared weights, its
  logits (the probe's initial answer, then the held-out evaluation), and its loop, made once the
  recipe has the initial answer: the worker's own (`native_loop`: a step over the data axis's
  feeds, apis/feeds.py) or the framework's (Keras fit).

The recipe makes the data and the weights (the same seeded numbers on every API), takes the
model's logits on the probe batch (the initial loss and logits: the same-answer check across
APIs), fills `extra` (samples, parameters, the data's and weights' digests, the epoch estimate)
and builds the Bench.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..bench import Bench, StepClock
from ..catalog import float_base
from ..protocol import CellSpec
from . import cnn_common as cc
from . import feeds, quantized
from .quantized import Quantization

T = TypeVar("T")
Adapter = Callable[[CellSpec, Any, cc.CnnData, list[np.ndarray]], T]


@dataclass
class Predictor:
    """An API's predict: its timed forward pass (step, sync or returns_to_host, timing,
    effective) and what the recipe reports of it."""

    bench: Bench
    parameters: int                                    # counted by the framework
    to_numpy: Callable[[Any], np.ndarray] = np.asarray   # a step's output as NumPy (the answer)
    quantization: Quantization | None = None


@dataclass
class Loop:
    """How an API's fit runs its calls: the worker's loop over a step, or the framework's."""

    drive: Callable[[StepClock], None]
    sync: Callable[[Any], None]
    loss: Callable[[Any], float]
    timing: str
    effective: dict[str, Any]
    steps_per_call: int = 1
    # The worker's own loop in the shared batch order: every API's first step sees the same
    # batch, so its loss belongs to the answer (cnn_common.answer_fields).
    native: bool = True


@dataclass
class Trainer:
    """An API's fit: its model with the shared initial weights, and its loop."""

    logits: Callable[[np.ndarray], np.ndarray]    # the model as it is now, on NHWC images
    parameters: int
    loop: Callable[[dict[str, Any]], Loop]        # given the extra its drive completes
    quantization: Quantization | None = None
    evaluation_batch: int = cc.EVAL_BATCH         # held-out rows per logits() call


def build(spec: CellSpec, fw: Any, predictor: Adapter[Predictor],
          trainer: Adapter[Trainer]) -> Bench:
    """A `cnn` cell's Bench on any API, from the API's two adapters."""
    data, weights = cc.make_data(spec), cc.initial_weights(spec.seed)
    if spec.task == "predict":
        return predicted(data, weights, predictor(spec, fw, data, weights))
    return trained(spec, data, weights, trainer(spec, fw, data, weights))


def predicted(data: cc.CnnData, weights: list[np.ndarray], made: Predictor) -> Bench:
    bench = made.bench
    bench.extra.update(cc.predict_extra(data, weights, made.parameters))
    bench.answer = lambda: cc.predict_answer(made.to_numpy(bench.call_step()))
    return quantized.record(bench, made.quantization)


def trained(spec: CellSpec, data: cc.CnnData, weights: list[np.ndarray], made: Trainer) -> Bench:
    x_probe, y_probe = cc.probe(data)
    initial = cc.initial_extra(made.logits(x_probe), y_probe)
    extra = cc.base_extra(data, weights, made.parameters, initial)
    loop = made.loop(extra)
    return quantized.record(Bench(
        drive=loop.drive, items_per_step=spec.batch_size, steps_per_call=loop.steps_per_call,
        calls_per_epoch=data.steps_per_epoch // loop.steps_per_call, sync=loop.sync,
        loss=loop.loss, timing=loop.timing, effective=loop.effective, extra=extra,
        evaluate=lambda: cc.evaluation(made.logits, data, batch=made.evaluation_batch),
        **cc.answer_fields(spec, initial, native_loop=loop.native)), made.quantization)


def forward_bench(spec: CellSpec, fw: Any, step: Callable[[], Any],
                  effective: dict[str, Any]) -> Bench:
    """A native predict's timed call: one forward pass over the predict batch, left on the
    device (timed in blocks, one synchronisation per block, as every step)."""
    return Bench(step=step, items_per_step=spec.batch_size, sync=fw.sync,
                 timing=cc.PREDICT_TIMING, effective=effective)


def native_loop(spec: CellSpec, fw: Any, data: cc.CnnData, step: Callable[..., Any],
                ways: feeds.Ways, *, loss: Callable[[Any], float], timing: str,
                effective: dict[str, Any]) -> Callable[[dict[str, Any]], Loop]:
    """The worker's own loop (bench.run_loop): `step(images, labels)` on the next batch of the
    data axis's feed, and the epoch estimate from the clock it filled."""

    def loop(extra: dict[str, Any]) -> Loop:
        batches, fed = feeds.chosen(spec.data, ways)

        def call() -> Any:
            return step(*next(batches))

        return Loop(drive=cc.stepped_drive(call, extra, data), sync=fw.sync, loss=loss,
                    timing=timing, effective={**effective, "data": fed})

    return loop


def precision_dtypes(spec: CellSpec, dtypes: dict[str, T]) -> tuple[T, T]:
    """The precision axis as (parameter dtype, compute dtype), each the framework's own."""
    param, compute = cc.PRECISION_DTYPES[float_base(spec.precision)]
    return dtypes[param], dtypes[compute]


def channels_first(weights: list[np.ndarray]) -> list[np.ndarray]:
    """The shared (Keras-layout) weights for a channels-first model (torch): conv kernels
    (kh, kw, in, out) → (out, in, kh, kw); dense kernels (in, out) → (out, in), the first one's
    rows from height-width-channel to channel-height-width order, as a channels-first feature
    map flattens."""
    out = []
    for array in weights:
        if array.ndim == 4:
            array = array.transpose(3, 2, 0, 1)
        elif array.ndim == 2:
            if array.shape[0] == cc.FLAT:
                side = int(np.sqrt(cc.FLAT // cc.CONV_FILTERS[-1]))
                array = (array.reshape(side, side, cc.CONV_FILTERS[-1], -1)
                         .transpose(2, 0, 1, 3).reshape(cc.FLAT, -1))
            array = array.T
        out.append(np.ascontiguousarray(array))
    return out
