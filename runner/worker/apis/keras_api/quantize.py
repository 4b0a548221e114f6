"""Keras 3's quantized tier: `model.quantize(mode)` on the built model whose weights are seeded
(the same random weights on every backend), before its predict or generate is timed
(docs/quantized.md). The modes (catalog/precisions.py) map onto Keras's own:

- int8: model.quantize("int8"): int8 kernels (abs-max per output channel) and activations
  quantized per row at call time, an int8 matmul;
- int8_weight_only: model.quantize(config=Int8QuantizationConfig(activation_quantizer=None));
- int4: model.quantize("int4"): int4 kernels in groups of 128, packed two per byte, weight-only;
- float8: model.quantize("float8"): Keras's FP8 recipe: e4m3 quantize-dequantize of inputs and
  kernels around the matmul (kernels stay float), which XLA's GEMM rewriter turns into float8
  GEMMs on GPUs of compute capability 8.9+ (JAX and TensorFlow backends); emulated elsewhere,
  and always on the torch backend, and the cell says so.

Dense, EinsumDense and (Reversible)Embedding layers are quantized; convolutions are not.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

from ...protocol import CellSpec
from .. import KerasFramework
from ...catalog import float_base, quantized_mode
from .. import quantized, tf32
from ..quantized import Quantization

TORCH_FLOAT8 = ("Keras on torch runs float8 as quantize-dequantize around float matmuls (no "
                "float8 GEMM rewrite)")


def settings(keras: Any, mode: str) -> tuple[dict[str, Any], str]:
    """model.quantize's arguments for a mode, and them in words."""
    if mode == "int8_weight_only":
        config = keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
        return {"config": config}, "model.quantize(config=Int8QuantizationConfig(" \
                                   "activation_quantizer=None))"
    return {"mode": mode}, f'model.quantize("{mode}") (its default configuration)'


def model_bytes(model: Any) -> int:
    """Bytes of every weight of the model, in the dtype each is stored in."""
    return sum(quantized.nbytes(v.shape, v.dtype) for v in model.weights)


def layers_of(model: Any) -> list[Any]:
    return [layer for layer in model._flatten_layers(include_self=False)]


def apply(spec: CellSpec, fw: KerasFramework, model: Any,
          probe: Callable[[], Any]) -> Quantization | None:
    """Quantizes `model` in place when the cell's precision is quantized (None otherwise), with
    the error figure from `probe` (the model's logits on fixed inputs) before and after."""
    mode = quantized_mode(spec.precision)
    if mode is None:
        return None
    keras = fw.keras
    kwargs, words = settings(keras, mode)
    params = {id(layer): layer.count_params() for layer in layers_of(model) if layer.built}
    found = Quantization(mode, "keras", keras.__version__, float_base(spec.precision),
                         params_total=model.count_params(), config=words)

    def quantize() -> None:
        with warnings.catch_warnings():         # layers without a quantized form say so
            warnings.simplefilter("ignore")
            model.quantize(**kwargs)

    quantized.measured(found, probe, quantize, lambda: model_bytes(model))
    layers: Counter[str] = Counter()
    for layer in layers_of(model):
        policy = getattr(layer, "dtype_policy", None)
        if getattr(policy, "quantization_mode", None):
            layers[type(layer).__name__] += 1
            found.params_quantized += params.get(id(layer), 0)
            found.policy = str(getattr(policy, "name", policy))
    found.layers = dict(layers)
    detail = fw.effective.get("tf32_detail") or {}
    found.execution = quantized.float8_execution(
        mode, fw.device, tf32.capability_tuple(detail.get("compute_capability")),
        TORCH_FLOAT8 if keras.backend.backend() == "torch" else None)
    return found
