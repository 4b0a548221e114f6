"""Gemma causal LM on Hugging Face's code (gemma_7b_en architecture at full size: transformers'
GemmaConfig from the keras-hub cell's configuration), LoRA fit through peft and generate; the
recipe is apis/huggingface/causal_lm.py. keras-hub's intermediate_dim counts both halves of the
gated feed-forward (49 152 for Gemma 7B): transformers' intermediate_size is one half (24 576).
The keras-hub cell's seeded weights are drawn in (its answers compare with the Keras cells')."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..huggingface.causal_lm import causal_lm_bench
from ..huggingface.weights import Transplant, heads_first_in, heads_out, same, transposed
from ..kerashub import configs, inputs
from . import Framework


def hf_config(cfg: dict):
    from transformers import GemmaConfig

    return GemmaConfig(
        vocab_size=cfg["vocabulary_size"], hidden_size=cfg["hidden_dim"],
        intermediate_size=cfg["intermediate_dim"] // 2, num_hidden_layers=cfg["num_layers"],
        num_attention_heads=cfg["num_query_heads"], num_key_value_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], hidden_act="gelu_pytorch_tanh", rms_norm_eps=1e-6,
        tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=2)


def keras_weights(cfg: dict) -> list[Transplant]:
    """keras-hub's GemmaCausalLM weights → GemmaForCausalLM's (the output layer is the token
    embedding, tied in both)."""
    width, heads, kv, head = (cfg["hidden_dim"], cfg["num_query_heads"],
                              cfg["num_key_value_heads"], cfg["head_dim"])
    inner = cfg["intermediate_dim"] // 2
    out = [Transplant("token_embedding/embeddings", (cfg["vocabulary_size"], width),
                      "model.embed_tokens.weight", same)]
    for i in range(cfg["num_layers"]):
        keras, hf = f"decoder_block_{i}", f"model.layers.{i}"
        out += [Transplant(f"{keras}/attention/query/kernel", (heads, width, head),
                           f"{hf}.self_attn.q_proj.weight", heads_first_in),
                Transplant(f"{keras}/attention/key/kernel", (kv, width, head),
                           f"{hf}.self_attn.k_proj.weight", heads_first_in),
                Transplant(f"{keras}/attention/value/kernel", (kv, width, head),
                           f"{hf}.self_attn.v_proj.weight", heads_first_in),
                Transplant(f"{keras}/attention/attention_output/kernel", (heads, head, width),
                           f"{hf}.self_attn.o_proj.weight", heads_out),
                Transplant(f"{keras}/ffw_gating/kernel", (width, inner),
                           f"{hf}.mlp.gate_proj.weight", transposed),
                Transplant(f"{keras}/ffw_gating_2/kernel", (width, inner),
                           f"{hf}.mlp.up_proj.weight", transposed),
                Transplant(f"{keras}/ffw_linear/kernel", (inner, width),
                           f"{hf}.mlp.down_proj.weight", transposed)]
    return out


def build(spec: CellSpec, fw: Framework) -> Bench:
    return causal_lm_bench(spec, fw, table=configs.GEMMA, hf_config=hf_config,
                           keras_weights=keras_weights, special=inputs.GEMMA_SPECIAL)
