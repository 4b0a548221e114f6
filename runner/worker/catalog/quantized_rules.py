"""Where a quantized precision (precisions.py) does not apply: asked after rules.py's rules, in
the order declared here. The reasons name what exists instead, so that an NA cell says why."""

from __future__ import annotations

from .apis import KERAS_QUANTIZE, TORCHAO
from .base import Where, rule
from .precisions import quantized_mode

# torchao's kernels for these modes exist on CUDA only (int4: tinygemm's packed layout;
# float8: torch._scaled_mm on compute capability >= 8.9).
TORCHAO_CUDA_ONLY = {"int4": "torchao's int4 weight-only kernels (tinygemm) run on CUDA GPUs only",
                     "float8": "torchao's float8 matmuls (torch._scaled_mm) need a CUDA GPU of "
                               "compute capability >= 8.9 (H100-class)"}


@rule("precision")
def quantized_api(c: Where) -> str | None:
    """Quantized precisions run where the API's record has a quantizer (Keras 3's model.quantize,
    torchao on torch and hf), NA with the record's reason elsewhere (docs/quantized.md, "Native
    JAX and TensorFlow"); a user workload receives spec.precision on every API and quantizes
    itself."""
    if quantized_mode(str(c.axes["precision"])) is None or c.workload.family == "user":
        return None
    return None if c.record.quantizer else c.record.quantizer.reason


# Where Keras trains a quantized model: its int8 and int4 kernels are frozen, so training means
# LoRA adapters over them (QLoRA: the causal LMs' fit, which trains LoRA); float8 is Keras's FP8
# training recipe (every Dense/EinsumDense kernel trained through float8 quantize-dequantize),
# which takes no LoRA adapters (the CNN's and BERT's fit train every weight).
KERAS_QUANTIZED_FIT = {"gemma": ("int8", "int8_weight_only", "int4"),
                       "mistral": ("int8", "int8_weight_only", "int4"),
                       "cnn": ("float8",), "bert": ("float8",)}


@rule("task")
def quantized_fit(c: Where) -> str | None:
    """Quantized training where the framework has it (Keras: QLoRA and FP8 training); NA with
    the reason elsewhere."""
    mode = quantized_mode(str(c.axes["precision"]))
    if mode is None or c.task != "fit" or c.workload.family == "user":
        return None
    if c.record.quantizer.how == KERAS_QUANTIZE:
        if mode in KERAS_QUANTIZED_FIT.get(c.workload.name, ()):
            return None
        if mode == "float8":
            return ("Keras's float8 layers take no LoRA adapters, and this fit trains LoRA "
                    "(float8 training: the CNN's and BERT's fit)")
        return (f"Keras's {mode} kernels are frozen: it trains them only through LoRA adapters "
                f"(QLoRA: Gemma's and Mistral's fit); {c.workload.name}'s fit trains every "
                "weight")
    if c.record.quantizer.how == TORCHAO:
        return (f"torchao's {mode} configurations are for inference (its quantized training is "
                "QAT or float8 training, other recipes); the quantized tier measures predict and "
                "generate there")
    return f"{c.record.title} has no quantized training ({c.record.quantizer.how} quantizes " \
           "for inference)"


@rule("device")
def torchao_cuda_only(c: Where) -> str | None:
    mode = quantized_mode(str(c.axes["precision"]))
    if c.record.quantizer.how == TORCHAO and mode in TORCHAO_CUDA_ONLY \
            and c.axes["device"] == "cpu" and c.workload.family != "user":
        return TORCHAO_CUDA_ONLY[mode]
    return None
