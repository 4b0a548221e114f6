"""Where a quantized precision (precisions.py) does not apply: asked after rules.py's rules, in
the order declared here. The reasons name what exists instead, so that an NA cell says why."""

from __future__ import annotations

from .base import Where, rule
from .precisions import quantized_mode

# The native APIs without a quantized path, and why (docs/quantized.md, "Native JAX and
# TensorFlow"). JAX: Google's quantization libraries (AQT, Qwix) rewrite a Flax model's layers
# for quantized training or serving; the native JAX workloads here are the array recipes and a
# Flax linen CNN whose only task with a quantized meaning (predict) would measure Qwix's
# interception of linen, not JAX. TensorFlow: post-training int8 exists only as TensorFlow
# Lite's converter (another runtime) or the Model Optimization Toolkit (Keras 2 models, in
# maintenance); neither quantizes a tf.function model in place.
NATIVE_REASONS = {
    "jax": "native JAX has no quantized layers of its own: Google's libraries for it (AQT, Qwix) "
           "rewrite Flax models for quantized training or serving and are not part of this "
           "stack; Keras 3 on JAX runs the quantized tier (api = \"keras\", backend = \"jax\")",
    "tensorflow": "native TensorFlow quantizes only by converting to TensorFlow Lite (another "
                  "runtime) or through the Model Optimization Toolkit (Keras 2 models, in "
                  "maintenance); Keras 3 on TensorFlow runs the quantized tier",
    "tf-keras": "Keras 2 (tf-keras) has no model.quantize (Keras 3 added it); its post-training "
                "quantization is TensorFlow Lite's converter, another runtime",
}
# torchao's kernels for these modes exist on CUDA only (int4: tinygemm's packed layout;
# float8: torch._scaled_mm on compute capability >= 8.9).
TORCHAO_CUDA_ONLY = {"int4": "torchao's int4 weight-only kernels (tinygemm) run on CUDA GPUs only",
                     "float8": "torchao's float8 matmuls (torch._scaled_mm) need a CUDA GPU of "
                               "compute capability >= 8.9 (H100-class)"}


@rule("precision")
def quantized_api(c: Where) -> str | None:
    """Quantized precisions run on Keras 3 (model.quantize) and on torch and hf (torchao)."""
    if quantized_mode(str(c.axes["precision"])) is None:
        return None
    return NATIVE_REASONS.get(c.api)


@rule("task")
def quantized_fit(c: Where) -> str | None:
    """The quantized tier measures inference: a built-in workload's fit is not applicable."""
    mode = quantized_mode(str(c.axes["precision"]))
    if mode is None or c.task != "fit" or c.workload.family == "user":
        return None
    if c.api == "keras":
        return (f"Keras trains a {mode} model only through LoRA adapters over its frozen "
                "quantized weights (QLoRA); the quantized tier measures predict and generate")
    return (f"torchao's {mode} configurations are for inference (its quantized training is "
            "QAT or float8 training, other recipes); the quantized tier measures predict and "
            "generate")


@rule("device")
def torchao_cuda_only(c: Where) -> str | None:
    mode = quantized_mode(str(c.axes["precision"]))
    if c.api in ("torch", "hf") and mode in TORCHAO_CUDA_ONLY and c.axes["device"] == "cpu" \
            and c.workload.family != "user":
        return TORCHAO_CUDA_ONLY[mode]
    return None
