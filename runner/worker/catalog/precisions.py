"""The precision axis's values, declared once: the float precisions, and the quantized ones (the
quantized tier, docs/quantized.md). Standard library only.

A quantized precision is `<mode>` or `<mode>_from_bfloat16`: the model is built in float32 (or
bfloat16), its weights seeded, and then quantized in place, after which it predicts or generates
with its dense layers' weights in the mode's format. The modes, each with one meaning on every
API that has it (Keras 3's `model.quantize`, torchao's `quantize_` on native torch and `hf`):

- int8: int8 weights (abs-max, one scale per output channel) and int8 activations quantized
  dynamically per row (per token); the matmul runs on int8. Keras's default int8 mode; torchao's
  Int8DynamicActivationInt8WeightConfig.
- int8_weight_only: int8 weights, activations kept in the float precision (the weights are
  dequantized in the matmul). Keras's Int8QuantizationConfig(activation_quantizer=None);
  torchao's Int8WeightOnlyConfig.
- int4: int4 weights in groups of 128 along the input, activations in the float precision.
  Keras's default int4 mode; torchao's Int4WeightOnlyConfig(group_size=128) (CUDA only).
- float8: float8 (e4m3) weights and activations with per-tensor scales. Keras's float8 mode;
  torchao's Float8DynamicActivationFloat8WeightConfig (CUDA, compute capability >= 8.9). Native
  only on such GPUs (H100-class): elsewhere Keras emulates it, and the cell says so.
"""

from __future__ import annotations

FLOAT_PRECISIONS = ("float32", "bfloat16", "mixed_float16", "mixed_bfloat16")
QUANTIZED_MODES = ("int8", "int8_weight_only", "int4", "float8")
# The float precisions a quantized model may be built in before it is quantized.
QUANTIZED_BASES = ("float32", "bfloat16")
FROM = "_from_"
QUANTIZED_PRECISIONS = tuple(f"{mode}{FROM}{base}" if base != "float32" else mode
                             for base in QUANTIZED_BASES for mode in QUANTIZED_MODES)


def quantized_mode(precision: str | None) -> str | None:
    """The quantization mode of a precision ("int8", ...), or None for a float precision."""
    if precision not in QUANTIZED_PRECISIONS:
        return None
    return str(precision).split(FROM)[0]


def float_base(precision: str) -> str:
    """The float precision a cell builds its model in: itself for a float precision, float32 or
    bfloat16 for a quantized one (the precision its answer is compared with)."""
    if quantized_mode(precision) is None:
        return precision
    return precision.split(FROM)[1] if FROM in precision else "float32"


def is_quantized(precision: str | None) -> bool:
    return quantized_mode(precision) is not None
