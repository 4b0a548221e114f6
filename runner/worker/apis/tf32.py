"""TF32 decided the same way for every API, from what the framework reports and the device it runs
on. Standard library only (the frameworks read their own flags and call in here), so that each
decision is tested with constants, GPU-less.

TF32 is NVIDIA's tensor-core format for float32 inputs (10-bit mantissa), on compute capability
8.0 (Ampere) and later; a framework "allows" it per path:
- torch: `torch.backends.cuda.matmul.allow_tf32` (off by default) for matmuls and
  `torch.backends.cudnn.allow_tf32` (on by default) for convolutions;
- JAX: `jax_default_matmul_precision` for dots and convolutions alike; unset ("default") lets XLA
  use TF32 on sm_80+, "highest" / "float32" forbids it;
- TensorFlow (and Keras 2): `tf.config.experimental.tensor_float_32_execution_enabled()`
  (on by default) for both;
- Keras 3 inherits its backend's flags (Keras sets none of them).
NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS and cuDNN for every framework.

The record's effective["tf32"] is the matmul path (the path the measured peak runs on);
effective["tf32_detail"] holds both paths and what was read. The matrix's `tf32 = true | false`
sets both paths on every API, so after it the two agree everywhere.
"""

from __future__ import annotations

import os
from typing import Any

TF32_MIN_CAPABILITY = (8, 0)
OVERRIDE_ENV = "NVIDIA_TF32_OVERRIDE"

# jax_default_matmul_precision values that keep float32 products in full float32 (no TF32 or
# bfloat16 pass, or several passes that restore float32 accuracy); every other value, unset
# included, lets XLA use TF32 (or cheaper) on a GPU that has it.
JAX_FULL_FLOAT32 = ("highest", "float32", "f32_f32_f32")
JAX_MULTI_PASS_SUFFIXES = ("_x3", "_x6", "_x9")


def capability_tuple(value: Any) -> tuple[int, int] | None:
    """(8, 0) from "8.0", (8, 0), [8, 0] or 8.0; None when unknown."""
    if value is None:
        return None
    try:
        if isinstance(value, (tuple, list)):
            return int(value[0]), int(value[1])
        major, _, minor = str(value).partition(".")
        return int(major), int(minor or 0)
    except (TypeError, ValueError, IndexError):
        return None


def has_tf32_hardware(gpu: bool, capability: Any) -> bool:
    found = capability_tuple(capability)
    return bool(gpu) and found is not None and found >= TF32_MIN_CAPABILITY


def jax_precision_allows_tf32(setting: str | None) -> bool:
    """Whether a jax_default_matmul_precision value lets float32 dots/convolutions use TF32."""
    if setting is None:
        return True
    value = str(setting).lower()
    if value in JAX_FULL_FLOAT32 or value.endswith(JAX_MULTI_PASS_SUFFIXES):
        return False
    return True


def decide(*, gpu: bool, capability: Any, matmul: bool, conv: bool,
           flags: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(effective tf32 of the matmul path, detail): TF32 in effect where the framework allows it
    on a path and the device has TF32 hardware, unless NVIDIA_TF32_OVERRIDE=0."""
    override = os.environ.get(OVERRIDE_ENV)
    hardware = has_tf32_hardware(gpu, capability) and override != "0"
    found = capability_tuple(capability)
    detail = {
        "matmul": bool(hardware and matmul),
        "conv": bool(hardware and conv),
        **flags,
        "compute_capability": f"{found[0]}.{found[1]}" if found else None,
    }
    if override is not None:
        detail[OVERRIDE_ENV] = override
    return detail["matmul"], detail


def cpu_only() -> tuple[bool, dict[str, Any]]:
    """An API that never runs on a GPU (NumPy)."""
    return False, {"matmul": False, "conv": False, "compute_capability": None}
