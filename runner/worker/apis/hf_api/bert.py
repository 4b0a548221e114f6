"""BERT text classifier on Hugging Face's code: transformers' BertForSequenceClassification with the
keras-hub cell's configuration (bert_base_en_uncased at full size: vocabulary 30 522, 12 layers,
768 wide; keras-hub's tanh-approximated GELU, layer-norm epsilon 1e-12, dropout 0.1, 2 classes).

The keras-hub cell's seeded weights are drawn into it (apis/huggingface/weights.py), and it takes
the same token ids, segment ids, padding mask and labels (apis/kerashub/inputs.py): its predict
answer compares with the Keras cells'. fit: AdamW with Keras' defaults as the Keras cell compiles
it (learning rate 5e-5, weight decay 0.004, epsilon 1e-7), cross-entropy on the logits; dropout
draws from torch's generator, so fit records no answer, as on Keras.
"""

from __future__ import annotations

import torch

from ...bench import Bench
from ...protocol import CellSpec
from ..data_parallel import torch_ddp as ddp
from .. import quantized, torchao_quantize
from ..huggingface import benches
from ..huggingface.weights import Transplant, heads_in, heads_out, same, transplant, transposed
from ..kerashub.configs import BERT, config
from ..kerashub.inputs import bert_inputs
from . import Framework


def hf_config(cfg: dict):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=cfg["vocabulary_size"], hidden_size=cfg["hidden_dim"],
        num_hidden_layers=cfg["num_layers"], num_attention_heads=cfg["num_heads"],
        intermediate_size=cfg["intermediate_dim"], max_position_embeddings=cfg["max_sequence_length"],
        type_vocab_size=2, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-12,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, num_labels=2)


def keras_weights(cfg: dict) -> list[Transplant]:
    """keras-hub's BertTextClassifier weights → BertForSequenceClassification's."""
    width, heads, inner = cfg["hidden_dim"], cfg["num_heads"], cfg["intermediate_dim"]
    per_head = (width, heads, width // heads)
    out = [Transplant("token_embedding/embeddings", (cfg["vocabulary_size"], width),
                      "bert.embeddings.word_embeddings.weight", same),
           Transplant("position_embedding/embeddings", (cfg["max_sequence_length"], width),
                      "bert.embeddings.position_embeddings.weight", same),
           Transplant("segment_embedding/embeddings", (2, width),
                      "bert.embeddings.token_type_embeddings.weight", same),
           Transplant("pooled_dense/kernel", (width, width), "bert.pooler.dense.weight", transposed),
           Transplant("logits/kernel", (width, 2), "classifier.weight", transposed)]
    for i in range(cfg["num_layers"]):
        keras, hf = f"transformer_layer_{i}", f"bert.encoder.layer.{i}"
        out += [Transplant(f"{keras}/self_attention_layer/{name}/kernel", per_head,
                           f"{hf}.attention.self.{name}.weight", heads_in)
                for name in ("query", "key", "value")]
        out += [Transplant(f"{keras}/self_attention_layer/attention_output/kernel",
                           (heads, width // heads, width), f"{hf}.attention.output.dense.weight",
                           heads_out),
                Transplant(f"{keras}/feedforward_intermediate_dense/kernel", (width, inner),
                           f"{hf}.intermediate.dense.weight", transposed),
                Transplant(f"{keras}/feedforward_output_dense/kernel", (inner, width),
                           f"{hf}.output.dense.weight", transposed)]
    return out


def build(spec: CellSpec, fw: Framework) -> Bench:
    from transformers import BertForSequenceClassification

    benches.no_preset(spec)
    cfg, batch = config(BERT, spec.size), spec.batch_size
    length = int(spec.options["sequence_length"])
    if length > cfg["max_sequence_length"]:
        raise ValueError(f"sequence_length {length} > the model's {cfg['max_sequence_length']}")
    hf = hf_config(cfg)
    hf._attn_implementation = benches.attention(spec)       # the tuned tier's knob, or sdpa
    model = BertForSequenceClassification(hf)
    facts = dict(sequence_length=length, batch_size=batch,
                 params=sum(p.numel() for p in model.parameters()),
                 preset=f"random weights, {spec.size} config",
                 seeded_weights=transplant(model, keras_weights(cfg), spec.seed))
    precision = benches.Precision(fw, spec.precision)
    model.to(fw.torch_device, precision.param_dtype)
    x, y = bert_inputs(spec.seed, batch, length, cfg["vocabulary_size"])
    own = fw.shards.own                   # a DDP rank's share of the global batch (all: one)
    inputs = benches.tensors(fw, {"input_ids": own(x["token_ids"]),
                                  "token_type_ids": own(x["segment_ids"]),
                                  "attention_mask": own(x["padding_mask"])}, precision.param_dtype)
    labels = torch.from_numpy(own(y)).to(fw.torch_device, torch.int64)
    effective = {"jit_compile": benches.compiled(fw),
                 "attn_implementation": model.config._attn_implementation}
    run = fw.compile(ddp.wrap(fw, model))
    if spec.task == "fit":
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.004, eps=1e-7,
                                      **fw.optimizer_options())
        facts["answer_note"] = ("the step draws dropout masks from each framework's own "
                                "generator: its first loss is no answer")
        return benches.fit_bench(
            fw, precision, lambda: torch.nn.functional.cross_entropy(
                run(**inputs).logits.float(), labels), optimizer, batch=batch,
            effective={**effective, "optimizer": "AdamW(lr=5e-5, weight_decay=0.004, eps=1e-7)"},
            extra=facts, first_loss_in_answer=False)
    model.eval()

    def probe():
        with torch.inference_mode(), precision.autocast():
            return model(**inputs).logits.float().cpu().numpy()

    found = torchao_quantize.apply(spec, fw, model, probe)
    return quantized.record(benches.predict_bench(
        fw, precision, lambda: run(**inputs).logits, batch=batch, effective=effective,
        extra=facts), found)
