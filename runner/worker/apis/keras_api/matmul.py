"""n×n matrix product with keras.ops (the same code on every Keras 3 backend);
the recipe is apis/matmul_common.py."""

from __future__ import annotations

from ..matmul_common import build

__all__ = ["build"]
