"""keras-hub Gemma causal LM (gemma_7b_en architecture) on Keras 3, LoRA fit and generate; the
recipe is apis/kerashub/causal_lm.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub import configs, inputs
from ..kerashub.causal_lm import causal_lm_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    import keras_hub

    models = keras_hub.models
    return causal_lm_bench(
        spec, fw, backbone_cls=models.GemmaBackbone, lm_cls=models.GemmaCausalLM,
        preprocessor_cls=models.GemmaCausalLMPreprocessor, tokenizer_cls=models.GemmaTokenizer,
        table=configs.GEMMA, special=inputs.GEMMA_SPECIAL)
