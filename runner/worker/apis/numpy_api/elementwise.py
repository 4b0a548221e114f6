"""SELU over a large array with NumPy; the recipe is apis/elementwise_common.py."""

from __future__ import annotations

from ..elementwise_common import build

__all__ = ["build"]
