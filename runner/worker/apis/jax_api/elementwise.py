"""SELU over a large array with native JAX: op-by-op dispatch or jax.jit;
the recipe is apis/elementwise_common.py."""

from __future__ import annotations

from ..elementwise_common import build

__all__ = ["build"]
