"""Keras 2 (the tf-keras package) on TensorFlow."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

try:
    import tf_keras  # noqa: E402
except ImportError:  # TensorFlow 2.15 carries Keras 2 itself, as tf.keras
    tf_keras = tf.keras

from ...protocol import CellSpec
from ..tensorflow_api import Framework as TensorFlow  # noqa: E402


class Framework(TensorFlow):
    name = "tf-keras"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        self.keras = tf_keras
        tf_keras.utils.set_random_seed(spec.seed)
        tf_keras.mixed_precision.set_global_policy(spec.precision)
        self.effective["dtype_policy"] = tf_keras.mixed_precision.global_policy().name

    def jit_compile(self) -> Any:
        return None if self.spec.jit == "auto" else bool(self.spec.jit)

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        meta["backend_version"] = meta.pop("framework_version")
        meta.update(framework_name="tf-keras", framework_version=tf_keras.__version__,
                    keras_version=tf_keras.__version__, keras_backend="tensorflow")
        return meta
