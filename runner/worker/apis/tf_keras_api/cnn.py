"""The CNN on Keras 2: the Keras adapter (keras_api/cnn.py), run with the tf_keras module on
TensorFlow (its data axis: tf.data and tf tensors)."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from .. import cnn_recipe as recipe
from ..keras_api.cnn import predictor, trainer
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    return recipe.build(spec, fw, predictor, trainer)
