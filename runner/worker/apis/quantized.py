"""The quantized tier's framework-neutral half (docs/quantized.md): what a quantized cell records
beside its measurement, the same for Keras (keras_api/quantize.py) and torchao (torchao_quantize.py).
Standard library and NumPy only.

A quantized cell builds its model in the float base precision with the seeded weights, runs its
probe (the outputs its answer is taken from: logits) once, quantizes the model in place, and runs
the probe again: the error figure compares the two on the same inputs in the same process, so
it is the quantization's error alone (same weights, same backend, same float arithmetic around
the quantized layers). What the cell records:

- effective["quantization"]: mode, library and version, the float precision it was built in,
  the layers quantized (count by class), the parameters in them, and where float8 runs
  (native or emulated);
- extra["quantization"]: the model's bytes before and after, and the error figure against the
  float model (quantization_error below).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..bench import Bench

# float8 (e4m3) matmuls exist on NVIDIA GPUs of compute capability 8.9 and later (Ada, Hopper).
FLOAT8_MIN_CAPABILITY = (8, 9)


def quantization_error(reference: Any, quantized: Any) -> dict[str, Any]:
    """The quantized model's outputs against the float model's on the same inputs, both arrays
    of logits (the last axis the classes or vocabulary): top-1 agreement over the rows, the
    largest absolute logit error, and that error relative to the float logits' largest
    magnitude (what the tolerance of a mode is stated in)."""
    ref = np.asarray(reference, np.float64)
    out = np.asarray(quantized, np.float64)
    if ref.shape != out.shape:
        raise ValueError(f"quantized outputs {out.shape} against float outputs {ref.shape}")
    if not (np.isfinite(ref).all() and np.isfinite(out).all()):
        return {"non_finite": int((~np.isfinite(out)).sum() + (~np.isfinite(ref)).sum())}
    rows_ref = ref.reshape(-1, ref.shape[-1]) if ref.ndim > 1 else ref.reshape(1, -1)
    rows_out = out.reshape(rows_ref.shape)
    agree = rows_ref.argmax(axis=-1) == rows_out.argmax(axis=-1)
    error = np.abs(rows_out - rows_ref)
    scale = float(np.abs(rows_ref).max())
    return {"rows": int(len(agree)), "top1_agreement": float(agree.mean()),
            "max_abs_error": float(error.max()),
            "rms_error": math.sqrt(float(np.mean(error * error))),
            "reference_max_abs": scale,
            "relative_error": float(error.max()) / scale if scale > 0 else None}


def float8_execution(mode: str, device: str, capability: tuple[int, int] | None,
                     emulated_always: str | None = None) -> str | None:
    """Where a float8 cell's matmuls ran: None for other modes; "native" on a GPU of compute
    capability >= 8.9; otherwise "emulated" with why (its speed is no measure of float8)."""
    if mode != "float8":
        return None
    if emulated_always:
        return f"emulated: {emulated_always}"
    if device != "gpu":
        return "emulated: no float8 matmul on a CPU (quantize-dequantize around float matmuls)"
    if capability is None or tuple(capability) < FLOAT8_MIN_CAPABILITY:
        return (f"emulated: compute capability {capability} < 8.9 has no float8 tensor cores")
    return "native"


@dataclass
class Quantization:
    """One cell's quantization, filled by a library's `apply` (keras_quantize, torchao_quantize)."""

    mode: str
    library: str
    version: str
    base: str                               # the float precision the model was built in
    layers: dict[str, int] = field(default_factory=dict)    # class name → layers quantized
    params_quantized: int = 0               # parameters in the quantized layers (before)
    params_total: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    execution: str | None = None            # float8: native or emulated (why)
    config: str = ""                        # the library's configuration, in words
    policy: str | None = None               # Keras: the quantized layers' dtype policy
    error: dict[str, Any] = field(default_factory=dict)

    def effective(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "library": f"{self.library} {self.version}",
                               "config": self.config, "built_in": self.base,
                               "layers": dict(self.layers),
                               "layers_quantized": sum(self.layers.values()),
                               "params_quantized": self.params_quantized,
                               "params_total": self.params_total}
        if self.policy is not None:
            out["dtype_policy"] = self.policy
        if self.execution is not None:
            out["float8"] = self.execution
        return out

    def extra(self) -> dict[str, Any]:
        return {"model_bytes_before": self.bytes_before, "model_bytes_after": self.bytes_after,
                "error": dict(self.error)}


# Bytes per element of the dtypes a model's weights may have (NumPy knows neither bfloat16 nor
# the float8 formats without ml_dtypes).
ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2,
            "float16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}


def nbytes(shape: Any, dtype: Any) -> int:
    """Bytes of one weight of `shape` and `dtype` (a name, or a framework's dtype object)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) * ITEMSIZE.get(name, 4)


def measured(quantization: Quantization, probe: Callable[[], Any],
             quantize: Callable[[], None], size: Callable[[], int]) -> Quantization:
    """Runs the probe on the float model, quantizes, runs it again: the error figure and the
    model's bytes before and after, filled into `quantization`."""
    quantization.bytes_before = size()
    reference = np.asarray(probe(), np.float32)
    quantize()
    quantization.bytes_after = size()
    quantization.error = quantization_error(reference, np.asarray(probe(), np.float32))
    return quantization


def record(bench: Bench, quantization: Quantization | None) -> Bench:
    """Puts a cell's quantization into its Bench (effective and extra); None: a float cell."""
    if quantization is not None:
        bench.effective["quantization"] = quantization.effective()
        bench.extra["quantization"] = quantization.extra()
    return bench
