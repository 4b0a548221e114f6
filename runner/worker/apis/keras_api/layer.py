"""The layer workload on Keras 3 (any backend): apis/layer_keras.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..layer_keras import layer_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    return layer_bench(spec, fw, fw.keras)
