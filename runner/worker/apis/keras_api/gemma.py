"""keras-hub Gemma causal LM (gemma_7b_en architecture) on Keras 3.

fit: LoRA (rank 4 by default) on random token ids, sequence length 128 at full size, next-token
cross-entropy through train_on_batch; the study ran it in bfloat16 (the matrix sets precision).
generate: a SentencePiece tokenizer trained in memory tokenises a few prompts, then generate runs
keras-hub's real sampling loop to max_length 50 (time per call, tokens/s in extra).
"""

from __future__ import annotations

from .. import kerashub_models as hub


def build(spec, fw):
    import keras_hub

    models = keras_hub.models
    return hub.causal_lm_bench(
        spec, fw, backbone_cls=models.GemmaBackbone, lm_cls=models.GemmaCausalLM,
        preprocessor_cls=models.GemmaCausalLMPreprocessor, tokenizer_cls=models.GemmaTokenizer,
        table=hub.GEMMA, special=hub.GEMMA_SPECIAL)
