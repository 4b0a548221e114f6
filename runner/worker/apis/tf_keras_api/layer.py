"""The layer workload on Keras 2 (tf_keras): apis/layer_keras.py with the tf_keras package, its
predict function on an iterator of the batch made once (kerashub/benches.py's Keras 2 feed) and
a GradientTape for the backward phase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...bench import Bench
from ...protocol import CellSpec
from ..keras_api.layer import gradient_tape
from ..kerashub import benches as hub_benches
from ..layer_keras import layer_bench
from . import Framework

FORWARD = "the model's predict function on an iterator of the batch, made once"


def forward(model: Any, x: Any) -> tuple[Callable[[], Any], str]:
    iterator = hub_benches.keras2_iterator(x)
    model.make_predict_function()
    return (lambda: model.predict_function(iterator)), FORWARD


def build(spec: CellSpec, fw: Framework) -> Bench:
    return layer_bench(spec, fw, fw.keras, forward, gradient_tape)
