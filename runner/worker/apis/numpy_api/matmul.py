"""n×n matrix product with NumPy (BLAS); the recipe is apis/matmul_common.py."""

from __future__ import annotations

from ..matmul_common import build

__all__ = ["build"]
