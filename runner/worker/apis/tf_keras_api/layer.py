"""The layer workload on Keras 2 (tf_keras): the Keras 3 code of apis/layer_keras.py, run with
the tf_keras package."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..layer_keras import layer_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    return layer_bench(spec, fw, fw.keras)
