"""The causal language models (Gemma, Mistral; Keras 3 only), written once with the keras-hub
classes injected by keras_api/gemma.py and keras_api/mistral.py.

fit: LoRA (rank options.lora_rank, 4 by default) on random token ids, sequence length 128 at full
size, next-token cross-entropy through train_on_batch; the study ran it in bfloat16 (the matrix
sets precision). generate: a SentencePiece tokenizer trained in memory tokenises a few prompts,
then model.generate runs keras-hub's real sampling loop on the token ids (preprocessor=None) to
options.max_length, 50 by default (time per call, tokens/s in extra); after the timed calls, the
time to first token (apis/first_token.py: prefill_ms and generated_tokens in extra). The prompts
are cut to the shortest one's length and the sampler is greedy on every model, as the hf cells'
(apis/first_token.py: the same work on both sides, recorded in effective).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...protocol import CellSpec
from .. import KerasFramework
from ...bench import Bench
from ...catalog import is_quantized
from .. import answers, first_token, quantized
from ..keras_api import quantize as keras_quantize
from .benches import fit_bench, jit_in_effect
from .configs import config
from .inputs import PROMPTS, causal_lm_inputs, seed_weights, sentencepiece_proto
from .models import local_preset

GENERATE_TIMING = ("one model.generate call per sample: the real sampling loop (greedy on every "
                   "model) from prompts of one length to max_length tokens, stop_token_ids=None "
                   "so every call generates the same number of tokens; the token ids are copied "
                   "to the host")


def causal_lm_bench(spec: CellSpec, fw: KerasFramework, *, backbone_cls, lm_cls, preprocessor_cls,
                    tokenizer_cls, table: dict[str, Any],
                    special: dict[str, tuple[int, str]]) -> Bench:
    preset = local_preset(spec.options)
    backbone = backbone_cls.from_preset(preset) if preset \
        else backbone_cls(**config(table, spec.size))
    facts: dict[str, Any] = dict(batch_size=spec.batch_size,
                                 preset=preset or f"random weights, {spec.size} config",
                                 params=backbone.count_params())
    if spec.task == "fit":
        return fit(spec, fw, backbone, lm_cls, facts, preset)
    tokenizer = tokenizer_cls(proto=sentencepiece_proto(special))
    return generate(spec, fw, backbone, lm_cls, preprocessor_cls(
        tokenizer=tokenizer, sequence_length=int(spec.options["max_length"])), facts, preset)


def fit(spec: CellSpec, fw: KerasFramework, backbone: Any, lm_cls, facts: dict[str, Any],
        preset: str | None) -> Bench:
    keras, batch = fw.keras, spec.batch_size
    rank = int(spec.options.get("lora_rank", 4))
    if rank:
        backbone.enable_lora(rank=rank)
    model = lm_cls(backbone=backbone, preprocessor=None)
    seed_weights(model, spec, facts, preset)
    optimizer = keras.optimizers.AdamW(learning_rate=5e-5, weight_decay=0.01)
    # As in keras-hub's LoRA fine-tuning guide: no weight decay on biases and norm scales.
    optimizer.exclude_from_weight_decay(var_names=["bias", "scale"])
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[], jit_compile=fw.jit_compile())
    length = int(spec.options["sequence_length"])
    x, y, weights = causal_lm_inputs(spec.seed, batch, length, backbone.vocabulary_size)
    if is_quantized(spec.precision) and not rank:
        raise ValueError(f"precision {spec.precision}: Keras trains quantized kernels only "
                         "through LoRA adapters (QLoRA), and options.lora_rank is 0")
    # QLoRA: the seeded model (LoRA adapters included) quantized; the adapters train over it.
    found = keras_quantize.apply(spec, fw, model, lambda: model.predict_on_batch(x))
    facts.update(sequence_length=length, lora_rank=rank,
                 trainable_params=sum(int(np.prod(v.shape)) for v in model.trainable_weights))
    return quantized.record(fit_bench(
        model, x, y, batch=batch, sample_weight=weights,
        effective={"jit_compile": jit_in_effect(model), "lora_rank": rank}, extra=facts), found)


def generate(spec: CellSpec, fw: KerasFramework, backbone: Any, lm_cls, preprocessor,
             facts: dict[str, Any], preset: str | None) -> Bench:
    keras, batch = fw.keras, spec.batch_size
    max_length = int(spec.options["max_length"])
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(batch)]
    # Tokenised once, outside the timed calls; generate then runs on token ids with
    # preprocessor=None, which is why stop_token_ids must be None (no end token is known).
    inputs = {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in
              preprocessor.generate_preprocess(prompts, sequence_length=max_length).items()}
    length = first_token.equal_prompts(
        [int(n) for n in inputs["padding_mask"].astype(bool).sum(axis=1)])
    if max_length - length < 2:     # as the hf cells: a decode latency needs two new tokens
        raise ValueError(f"max_length {max_length} leaves {max_length - length} new token(s) "
                         f"after prompts of {length}: at least 2 are needed")
    inputs = cut_prompts(inputs, length)
    model = lm_cls(backbone=backbone, preprocessor=None)
    seed_weights(model, spec, facts, preset)
    # Greedy on every model, as the hf cells (keras-hub's Mistral samples top-k by default).
    model.compile(sampler="greedy", jit_compile=fw.jit_compile())
    found = keras_quantize.apply(spec, fw, model,
                                 lambda: next_token_logits(keras, model, inputs)[:, 0, :])
    # keras-hub seeds its cache with one forward over the whole buffer: max_length positions.
    work = first_token.generate_work(length, max_length, prefill_positions=max_length)
    new_tokens = batch * work["new_tokens_per_sequence"]
    facts.update(max_length=max_length, prompt_tokens=batch * length,
                 new_tokens_per_call=new_tokens,
                 tokenizer_vocabulary=preprocessor.tokenizer.vocabulary_size(),
                 sampler=type(model.sampler).__name__ if hasattr(model, "sampler") else None,
                 first_token_call={"prefill_positions": length + 1, "decode_iterations": 1,
                                   "loop_iterations_after_prefill": 1})
    durations: list[float] = []

    def step():
        started = time.perf_counter()
        out = model.generate(dict(inputs), stop_token_ids=None)
        ids = np.asarray(keras.ops.convert_to_numpy(out["token_ids"]))
        durations.append(time.perf_counter() - started)
        facts["generated_length"] = int(ids.shape[1])
        return ids

    def evaluate() -> dict[str, Any]:
        # Tokens per second over the timed calls (the first call, which compiles, is excluded).
        timed = durations[spec.warmup_steps:] or durations
        return {"tokens_per_s": new_tokens * len(timed) / sum(timed),
                **prefill(keras, model, inputs, length, len(timed),
                          work["new_tokens_per_sequence"]),
                "decode_base_ms": first_token.call_times(
                    lambda: one_call(keras, model, same_buffer(inputs, max_length)), len(timed))}

    return quantized.record(Bench(
        items_per_step=batch, timing=GENERATE_TIMING, returns_to_host=True,
        effective={"jit_compile": jit_in_effect(model), **work}, extra=facts, step=step,
        evaluate=evaluate,
        answer=lambda: generate_answer(keras, model, inputs, step, facts["sampler"])), found)


def cut_prompts(inputs: dict[str, np.ndarray], length: int) -> dict[str, np.ndarray]:
    """Every prompt cut to `length` tokens (first_token.equal_prompts), the positions after it
    padding as the shortest prompt's are."""
    ids, mask = inputs["token_ids"].copy(), inputs["padding_mask"].copy()
    shortest = int(np.argmin(mask.astype(bool).sum(axis=1)))
    ids[:, length:] = ids[shortest, length:]
    mask[:, length:] = 0
    return {"token_ids": ids, "padding_mask": mask}


def prefill(keras, model, inputs: dict[str, np.ndarray], length: int, timed_calls: int,
            tokens: int) -> dict[str, Any]:
    """Time to first token (apis/first_token.py): keras-hub's generate call that makes one new
    token per sequence from the same prompts, a buffer of the prompts and one position (its
    prefill over length + 1 positions, one iteration of its loop), as a keras-hub user asking
    for one token gets; Hugging Face's is its generate with max_new_tokens = 1. N, the tokens a
    timed call makes per sequence, is `tokens`."""
    one_token = {k: v[:, :length + 1] for k, v in inputs.items()}
    return first_token.prefill_facts(lambda: one_call(keras, model, one_token), timed_calls,
                                     tokens)


def same_buffer(inputs: dict[str, np.ndarray], max_length: int) -> dict[str, np.ndarray]:
    """The timed call's buffer with its prompts extended to max_length − 1 positions: a call
    that makes one new token per sequence after the same whole-buffer prefill as a timed call
    (the decode latency's T(1): first_token.py)."""
    mask = inputs["padding_mask"].copy()
    mask[:, :max_length - 1] = 1
    return {"token_ids": inputs["token_ids"], "padding_mask": mask}


def one_call(keras, model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    out = model.generate(dict(inputs), stop_token_ids=None)
    return np.asarray(keras.ops.convert_to_numpy(out["token_ids"]))


def generate_answer(keras, model, inputs: dict[str, np.ndarray], step,
                    sampler: str | None) -> dict[str, Any]:
    """The next-token logits after each prompt (a forward pass), and the first tokens generated
    where decoding is greedy: a sampler draws from each backend's own generator."""
    starts = inputs["padding_mask"].astype(bool).sum(axis=1)
    out = {"next_token_logits": answers.output(next_token_logits(keras, model, inputs))["output"]}
    if sampler == "GreedySampler":
        out |= answers.tokens(step(), [int(s) for s in starts])
    return out


def next_token_logits(keras, model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The logits of the token after each prompt, (batch, 1, vocabulary) float32 on the host: a
    forward pass (the answer's, and a quantized cell's probe)."""
    starts = inputs["padding_mask"].astype(bool).sum(axis=1)
    logits = model(dict(inputs))
    last = keras.ops.take_along_axis(
        logits, keras.ops.convert_to_tensor(starts.astype("int32") - 1)[:, None, None], axis=1)
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(last, "float32")))
