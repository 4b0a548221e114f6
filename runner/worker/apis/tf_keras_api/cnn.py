"""The CNN trained with Keras 2 (tf_keras) `model.fit`: the Keras 3 module's code, run with the
tf_keras package on TensorFlow (the data axis uses tf.data and tf tensors)."""

from __future__ import annotations

from ...protocol import CellSpec
from ...bench import Bench
from ..keras_api.cnn import fit_bench, predict_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    if spec.task == "predict":
        return predict_bench(spec, fw, fw.keras)
    return fit_bench(spec, fw, fw.keras, backend="tensorflow")
