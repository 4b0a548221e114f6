"""SELU over a large array with native TensorFlow: eager, tf.function, or XLA;
the recipe is apis/elementwise_common.py."""

from __future__ import annotations

from ..elementwise_common import build

__all__ = ["build"]
