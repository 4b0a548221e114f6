"""keras-hub Mistral causal LM (mistral_7b_en architecture) on Keras 3, LoRA fit and generate; the
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
        spec, fw, backbone_cls=models.MistralBackbone, lm_cls=models.MistralCausalLM,
        preprocessor_cls=models.MistralCausalLMPreprocessor, tokenizer_cls=models.MistralTokenizer,
        table=configs.MISTRAL, special=inputs.MISTRAL_SPECIAL)
