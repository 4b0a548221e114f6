"""Mistral causal LM on Hugging Face's code (mistral_7b_en architecture at full size:
transformers' MistralConfig from the keras-hub cell's configuration), LoRA fit through peft and
generate; the recipe is apis/huggingface/causal_lm.py. The keras-hub cell's seeded weights are
drawn in (its answers compare with the Keras cells'; keras-hub's Mistral samples top-k by default
where transformers decodes greedily, so only the logits compare)."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..huggingface.causal_lm import causal_lm_bench
from ..huggingface.weights import Transplant, heads_in, heads_out, same, transposed
from ..kerashub import configs, inputs
from . import Framework


def hf_config(cfg: dict):
    from transformers import MistralConfig

    return MistralConfig(
        vocab_size=cfg["vocabulary_size"], hidden_size=cfg["hidden_dim"],
        intermediate_size=cfg["intermediate_dim"], num_hidden_layers=cfg["num_layers"],
        num_attention_heads=cfg["num_query_heads"], num_key_value_heads=cfg["num_key_value_heads"],
        head_dim=cfg["hidden_dim"] // cfg["num_query_heads"], hidden_act="silu",
        rms_norm_eps=cfg.get("layer_norm_epsilon", 1e-6), sliding_window=cfg["sliding_window"],
        rope_parameters={"rope_type": "default",
                         "rope_theta": float(cfg.get("rope_max_wavelength", 10000))},
        tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def keras_weights(cfg: dict) -> list[Transplant]:
    """keras-hub's MistralCausalLM weights → MistralForCausalLM's."""
    width, heads, kv = cfg["hidden_dim"], cfg["num_query_heads"], cfg["num_key_value_heads"]
    head, inner, vocab = width // heads, cfg["intermediate_dim"], cfg["vocabulary_size"]
    out = [Transplant("token_embedding/embeddings", (vocab, width), "model.embed_tokens.weight",
                      same),
           Transplant("token_embedding/reverse_embeddings", (width, vocab), "lm_head.weight",
                      transposed)]
    for i in range(cfg["num_layers"]):
        keras, hf = f"transformer_layer_{i}", f"model.layers.{i}"
        out += [Transplant(f"{keras}/self_attention/query/kernel", (width, heads, head),
                           f"{hf}.self_attn.q_proj.weight", heads_in),
                Transplant(f"{keras}/self_attention/key/kernel", (width, kv, head),
                           f"{hf}.self_attn.k_proj.weight", heads_in),
                Transplant(f"{keras}/self_attention/value/kernel", (width, kv, head),
                           f"{hf}.self_attn.v_proj.weight", heads_in),
                Transplant(f"{keras}/self_attention/attention_output/kernel", (heads, head, width),
                           f"{hf}.self_attn.o_proj.weight", heads_out),
                Transplant(f"{keras}/feedforward_intermediate_dense/kernel", (width, inner),
                           f"{hf}.mlp.up_proj.weight", transposed),
                Transplant(f"{keras}/feedforward_gate_dense/kernel", (width, inner),
                           f"{hf}.mlp.gate_proj.weight", transposed),
                Transplant(f"{keras}/feedforward_output_dense/kernel", (inner, width),
                           f"{hf}.mlp.down_proj.weight", transposed)]
    return out


def build(spec: CellSpec, fw: Framework) -> Bench:
    return causal_lm_bench(spec, fw, table=configs.MISTRAL, hf_config=hf_config,
                           keras_weights=keras_weights, special=inputs.MISTRAL_SPECIAL)
