"""The GPU check's parts, in priority order (PARTS), and the budget: the parts that fit it, in
that order (a part too long for what is left is passed over, and a later, shorter one may still
run). First what has never run on a GPU (issue 58: per-op profiles, the quantized tier, the
tuned tier, the layer family), each split so that one or two fit a call; then the parts the
first GPU check measured (docs/gpu-check.md, 2026-11-27), for a machine or stack not seen yet.
A part that runs one of matrices/ is sized by the runner's own plan of it (part.py); the others
by their own figures (harness_parts.py). Standard library only (check.py's reason)."""

from __future__ import annotations

from typing import Any

from carried_wheels import CheckError
from context import PACK_S, SETUP_S, Context, Outcome
from harness_parts import (MATMUL, NVML_S, PYTEST_GPU_S, nvml_part, overhead_estimate,
                           overhead_part, pytest_part)
from part import Part, Query, runner
from tuned_part import tuned

GEMMA, CNN, BERT = ("gemma-generate-",), ("cnn-fit-",), ("bert-",)
# Two layers a part (8 cells): each part fits a call beside another.
LAYERS, LAYERS_2, LAYERS_3 = (tuple(f"*layer={name}*" for name in pair) for pair in (
    ("dense", "multiheadattention"), ("layernormalization", "conv2d"), ("lstm", "embedding")))

PARTS = (   # in priority order
    Part("nvml", "the GPU's clocks, power limit, idle power; runner doctor",
         lambda ctx: NVML_S, nvml_part),
    runner("profiles", "profiles", "per-op profiles: bf16 8192³ products (torch, JAX) and Gemma "
           "generate (Keras on JAX and torch, HF): GPU kernels by category", ("matmul-run-",
                                                                             *GEMMA)),
    runner("quantized", "quantized", "Gemma generate b32 from bf16: int8, float8 (Keras on JAX "
           "and torch), int8, int4, float8 (HF, torchao): speed, bytes, VRAM, error", GEMMA),
    Part("pytest-gpu", "pytest -m gpu", lambda ctx: PYTEST_GPU_S, pytest_part),
    runner("profiles-cnn", "profiles", "per-op profiles of the small CNN's fit: Keras on JAX "
           "and torch", CNN),
    tuned("tuned", "the CNN's fit tuned (jit_compile, torch.compile) on Keras (JAX, torch) and "
          "torch, then both tiers", CNN),
    runner("quantized-bert", "quantized", "BERT predict b256: float32, int8, float8 on Keras "
           "(JAX, torch) and HF", BERT),
    runner("layers", "layers", "the Keras tax per layer (Keras on JAX and torch ÷ JAX, torch), "
           "model shapes, bf16: Dense, MultiHeadAttention", LAYERS),
    runner("layers-2", "layers", "the Keras tax per layer: LayerNormalization, Conv2D", LAYERS_2),
    runner("layers-3", "layers", "the Keras tax per layer: LSTM, Embedding", LAYERS_3),
    tuned("tuned-bert", "BERT small's fit tuned (jit_compile, torch.compile) on Keras (JAX, "
          "torch) and HF, then both tiers", BERT),
    # Measured on the H200 of 2026-11-27 (docs/gpu-check.md):
    runner("matmul", "matmul", "calibrated peak; 8192³ float32/bfloat16 products, torch and JAX"),
    Part("overhead", "runner ÷ bare loop of the same product, same interpreter",
         overhead_estimate, overhead_part, plans=(MATMUL,)),
    runner("keras-table", "keras_table", "BERT fit, Gemma generate (TTFT), size small: Keras "
           "on JAX and torch, HF", ("bert-fit-", "gemma-generate-")),
    runner("cnn", "cnn", "the small CNN's fit at batch 128: Keras (JAX, torch), torch, JAX"),
    runner("elementwise", "elementwise", "SELU on 2^24 floats, eager and compiled, torch and JAX"),
    runner("bert-predict", "keras_table", "BERT predict at batch 256, size small: Keras on JAX "
           "and torch, HF", ("bert-predict-",)),
)


def queries(parts: tuple[Part, ...]) -> list[Query]:
    """Every plan the parts read, once each."""
    return list(dict.fromkeys(query for part in parts for query in part.plans))


def choose_parts(ctx: Context, parts: tuple[Part, ...] = PARTS) -> tuple[list[Part], list[Part]]:
    """(kept, dropped): in priority order, each part whose estimate fits what the budget has
    left after the set-up, the packing and the parts kept before it (ctx.kept: their names)."""
    kept: list[Part] = []
    dropped: list[Part] = []
    room = ctx.budget_s - SETUP_S - PACK_S
    ctx.kept = set()
    for part in parts:
        need = part.estimate(ctx)
        if need <= room:
            kept.append(part)
            ctx.kept.add(part.name)
            room -= need
        else:
            dropped.append(part)
    if not kept:
        need = min(p.estimate(ctx) for p in parts) + SETUP_S + PACK_S
        raise CheckError(f"--minutes {ctx.budget_s / 60:g} is too little: the shortest part "
                         f"alone needs about {need:.0f} s")
    return kept, dropped


def expected_na(plan: dict[str, Any], cell: dict[str, Any]) -> bool:
    """A cell planned not applicable for a reason of the check's making, no matrix error: a
    benchmark of the other profile, a tuned cell before its tuning, a GPU-only cell in a
    plan without a GPU (a CPU rehearsal)."""
    reason = str(cell["not_applicable"])
    return "profile only" in reason or reason.startswith("no tuning of") or (
        plan.get("flavour") == "cpu" and "this run has no GPU" in reason)


def dry_run_part(ctx: Context, part: Part) -> Outcome:
    """The runner's own plan of the part's matrix (nothing measured, nothing written)."""
    estimate = part.estimate(ctx)
    if part.matrix is None:
        return Outcome(part.name, "planned", estimate, detail=part.what)
    plan = ctx.plans[part.matrix, part.only]
    runnable = [c for c in plan["cells"] if c["status"] == "to run"]
    calibrations = [c["name"] for c in plan["calibrations"]]
    estimates = plan["estimate"]
    na = [f"{c['name']}: {c['not_applicable']}" for c in plan["cells"]
          if c["status"] == "not applicable" and not expected_na(plan, c)]
    waiting = [c for c in plan["cells"] if c["status"] == "not applicable" and expected_na(plan, c)]
    gpu_only = [c["name"] for c in waiting if "this run has no GPU" in str(c["not_applicable"])]
    tuned = [c for c in waiting if str(c["not_applicable"]).startswith("no tuning of")]
    detail = (f"{len(runnable)} cells ({sum(c['runs'] for c in runnable)} processes)"
              + (f" and {len(calibrations)} calibrations of the peak" if calibrations else "")
              + (f", {estimates['profiled']} profiled" if estimates.get("profiled") else "")
              + (f", {len(tuned)} tuned once `runner tune` has run" if tuned else "")
              + (f"; on a GPU also {', '.join(gpu_only)}" if gpu_only else "")
              + (f"; not applicable: {'; '.join(na)}" if na else ""))
    return Outcome(part.name, "failed" if na else "planned", estimate, detail=detail,
                   figures={"planned": [c["name"] for c in runnable] + calibrations})
