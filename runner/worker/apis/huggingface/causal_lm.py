"""Gemma and Mistral on Hugging Face's code (hf_api/gemma.py, hf_api/mistral.py inject their
configuration and weight map): AutoModelForCausalLM.from_config, the keras-hub cell's seeded
weights drawn in, the same inputs.

fit: LoRA through peft (rank options.lora_rank, 4 by default, on the query and value projections
as keras-hub's enable_lora; alpha = rank, so the update's scale is 1 as in Keras; no LoRA dropout),
AdamW as the Keras cell (learning rate 5e-5, weight decay 0.01 except biases and norm scales,
epsilon 1e-7), next-token cross-entropy on random ids (apis/kerashub/inputs.causal_lm_inputs).

generate: the keras-hub cell's prompts tokenised by the same in-memory SentencePiece model (a
start token first), cut to the shortest one's length as the keras-hub cell's (so no padding is
needed), and model.generate with min_new_tokens == max_new_tokens and no end token, so every call
makes the same number of tokens: from the prompts to options.max_length in all (50 by default),
as many as the keras-hub cell's loop (apis/first_token.py: the same work, in effective). Greedy, transformers'
default. jit = true: transformers' own compiled generate, a static key/value cache with the
decoding forward torch.compile'd (its CompileConfig, in the jit axis's mode). Time to first token
and per-token decode latency after the timed calls (apis/first_token.py).
"""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Callable

import numpy as np
import torch

from ... import tuning
from ...protocol import CellSpec
from .. import TorchFramework
from ...bench import Bench
from .. import answers, first_token, quantized, torchao_quantize
from ..kerashub.configs import config
from ..kerashub.inputs import PROMPTS, causal_lm_inputs, sentencepiece_proto
from . import benches
from .weights import Transplant, transplant

GENERATE_TIMING = ("one model.generate call per sample (greedy, min_new_tokens = max_new_tokens, "
                   "no end token: every call makes the same number of tokens, from prompts of "
                   "one length); the token ids are copied to the host")


def causal_lm_bench(spec: CellSpec, fw: TorchFramework, *, table: dict[str, Any],
                    hf_config: Callable[[dict], Any],
                    keras_weights: Callable[[dict], list[Transplant]],
                    special: dict[str, tuple[int, str]]) -> Bench:
    from transformers import AutoModelForCausalLM

    benches.no_preset(spec)
    cfg = config(table, spec.size)
    model = AutoModelForCausalLM.from_config(hf_config(cfg),
                                             attn_implementation=benches.attention(spec))
    facts: dict[str, Any] = dict(batch_size=spec.batch_size,
                                 preset=f"random weights, {spec.size} config",
                                 params=sum(p.numel() for p in model.parameters()),
                                 seeded_weights=transplant(model, keras_weights(cfg), spec.seed))
    precision = benches.Precision(fw, spec.precision)
    model.to(fw.torch_device, precision.param_dtype)
    effective = {"jit_compile": benches.compiled(fw),
                 "attn_implementation": model.config._attn_implementation}
    if spec.task == "fit":
        return fit(spec, fw, model, precision, cfg["vocabulary_size"], facts, effective)
    return generate(spec, fw, model, precision, special, facts, effective)


def fit(spec: CellSpec, fw: TorchFramework, model: Any, precision: benches.Precision, vocab: int,
        facts: dict[str, Any], effective: dict[str, Any]) -> Bench:
    rank = int(spec.options.get("lora_rank", 4))
    if rank:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"]))
    model.train()
    length = int(spec.options["sequence_length"])
    x, y, _ = causal_lm_inputs(spec.seed, spec.batch_size, length, vocab)
    data = benches.tensors(fw, {"input_ids": x["token_ids"], "attention_mask": x["padding_mask"],
                                "labels": y}, precision.param_dtype)
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    decayed = [p for name, p in trained if "bias" not in name and "norm" not in name]
    optimizer = torch.optim.AdamW(
        [{"params": decayed}, {"params": [p for name, p in trained if "bias" in name
                                          or "norm" in name], "weight_decay": 0.0}],
        lr=5e-5, weight_decay=0.01, eps=1e-7, **fw.optimizer_options())
    run = fw.compile(model)

    def loss_of() -> torch.Tensor:
        logits = run(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1),
                                                 data["labels"].flatten())

    facts.update(sequence_length=length, lora_rank=rank,
                 trainable_params=sum(p.numel() for _, p in trained))
    return benches.fit_bench(fw, precision, loss_of, optimizer, batch=spec.batch_size,
                             effective={**effective, "lora_rank": rank,
                                        "optimizer": "AdamW(lr=5e-5, weight_decay=0.01, "
                                                     "eps=1e-7)"},
                             extra=facts, first_loss_in_answer=True)


def prompt_rows(special: dict[str, tuple[int, str]], batch: int) -> list[list[int]]:
    """The keras-hub cell's prompts as token ids: its in-memory SentencePiece model, the start
    token first (keras-hub's generate_preprocess)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=sentencepiece_proto(special))
    start = special["bos"][0]
    return [[start, *processor.encode(PROMPTS[i % len(PROMPTS)])] for i in range(batch)]


def padded(rows: list[list[int]], pad: int, left: bool) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of rows padded to the longest: left (generate) or right (the answer)."""
    width = max(len(row) for row in rows)
    ids = np.full((len(rows), width), pad, np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span], mask[i, span] = row, 1
    return ids, mask


def generation_config(model, tokens: int, compiled: bool, mode: Any,
                      static: bool = False) -> Any:
    """Greedy, exactly `tokens` new tokens, no end token; compiled: transformers' static cache
    and its compile of the decoding forward, in the jit axis's mode; `static` (the tuned
    tier's static_cache knob): the static cache without the compile."""
    from transformers import CompileConfig, GenerationConfig

    settings: dict[str, Any] = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                                    eos_token_id=None, pad_token_id=model.config.pad_token_id,
                                    bos_token_id=model.config.bos_token_id, use_cache=True)
    if compiled:
        compile_config = CompileConfig(mode="default" if mode is True else str(mode))
        # transformers compiles on accelerators only unless told (its flag for CPU tests): jit =
        # true means compiled on every device, as on the torch api.
        compile_config._compile_all_devices = True
        settings.update(cache_implementation="static", compile_config=compile_config)
    elif static:
        settings.update(cache_implementation="static")
    return GenerationConfig(**settings)


def generate(spec: CellSpec, fw: TorchFramework, model: Any, precision: benches.Precision,
             special: dict[str, tuple[int, str]], facts: dict[str, Any],
             effective: dict[str, Any]) -> Bench:
    model.eval()
    batch, max_length = spec.batch_size, int(spec.options["max_length"])
    pad = 0 if model.config.pad_token_id is None else int(model.config.pad_token_id)
    model.config.pad_token_id = model.generation_config.pad_token_id = pad
    rows = prompt_rows(special, batch)
    length = first_token.equal_prompts([len(row) for row in rows])
    rows = [row[:length] for row in rows]
    ids, mask = padded(rows, pad, left=True)
    width = ids.shape[1]
    tokens = max_length - width
    if tokens < 2:
        raise ValueError(f"max_length {max_length} leaves {tokens} new token(s) after prompts "
                         f"of {width}: at least 2 are needed")
    data = benches.tensors(fw, {"input_ids": ids, "attention_mask": mask}, precision.param_dtype)
    found = torchao_quantize.apply(
        spec, fw, model, lambda: next_token_logits(model, precision, rows, pad))
    compiled = benches.compiled(fw)
    static = compiled or bool(tuning.knob(spec, "static_cache"))
    configs = {n: generation_config(model, n, compiled, spec.jit, static) for n in (tokens, 1)}
    durations: list[float] = []

    def call(new: int) -> np.ndarray:
        with torch.inference_mode(), precision.autocast():
            out = model.generate(**data, generation_config=configs[new])
        return out.cpu().numpy()

    def step() -> np.ndarray:
        started = time.perf_counter()
        out = call(tokens)
        durations.append(time.perf_counter() - started)
        facts["generated_length"] = int(out.shape[1])
        return out

    facts.update(max_length=max_length, prompt_tokens=int(mask.sum()), prompt_width=width,
                 new_tokens_per_call=batch * tokens, sampler="greedy (do_sample=False)",
                 first_token_call={"prefill_positions": width, "decode_iterations": 1,
                                   "loop_iterations_after_prefill": 0})
    # Hugging Face's prefill covers the prompt; its loop's first iteration is that prefill.
    work = first_token.generate_work(width, max_length, prefill_positions=width)
    fw.effective["jit"] = ("transformers' compiled generate (static cache, decoding forward "
                           f"torch.compile'd, mode {configs[tokens].compile_config.mode!r})"
                           if compiled else "eager")

    def evaluate() -> dict[str, Any]:
        timed = durations[spec.warmup_steps:] or durations
        return {"tokens_per_s": batch * tokens * len(timed) / sum(timed),
                **first_token.prefill_facts(lambda: call(1), len(timed), tokens)}

    return quantized.record(Bench(
        step=step, items_per_step=batch, returns_to_host=True, timing=GENERATE_TIMING,
        effective={**precision.effective, **effective, **work,
                   "cache": "static" if static else "dynamic"},
        extra=facts, evaluate=evaluate,
        answer=lambda: generate_answer(model, precision, rows, pad, step, width)), found)


def generate_answer(model, precision, rows: list[list[int]], pad: int, step,
                    width: int) -> dict[str, Any]:
    """As the keras-hub cell's: the next-token logits after each prompt (a forward pass over the
    right-padded prompts, so that positions count from each prompt's start), and the first
    greedy tokens generated."""
    last = next_token_logits(model, precision, rows, pad)[:, None, :]
    out = {"next_token_logits": answers.output(last)["output"]}
    return out | answers.tokens(step(), [width] * len(rows))


def next_token_logits(model, precision, rows: list[list[int]], pad: int) -> np.ndarray:
    """The logits of the token after each prompt (batch, vocabulary), float32 on the host: a
    forward pass over the right-padded prompts, so that positions count from each prompt's
    start (the answer's, and a quantized cell's probe)."""
    device = next(model.parameters()).device
    ids, mask = padded(rows, pad, left=False)
    with torch.inference_mode(), precision.autocast():
        logits = model(input_ids=torch.from_numpy(ids).to(device),
                       attention_mask=torch.from_numpy(mask).to(device)).logits
    ends = torch.from_numpy(mask.sum(axis=1) - 1).to(device)
    return logits[torch.arange(len(rows), device=device), ends].float().cpu().numpy()
