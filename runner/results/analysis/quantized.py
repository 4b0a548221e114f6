"""The quantized tier on the host (docs/quantized.md): each quantized cell's answer error, judged
under the tolerance of its mode, and the float cell it stands beside.

A quantized cell measures its own error in the worker (runner/worker/apis/quantized.py): the
model's logits on fixed inputs before and after quantizing, same weights, same backend, same
process. That is the float32 (or bfloat16) answer of the same row and environment, exactly; its
figures (top-1 agreement, largest logit error and that error relative to the float logits'
largest magnitude) are what every table shows. The verdict: within the mode's tolerance when the
relative error is at most TOLERANCES[mode]:

- int8 and int8_weight_only, 5e-2: abs-max int8 rounds each weight (and activation) by at most
  half a step, 1/254 of its channel's (row's) largest magnitude, ~0.4 %; through a network's
  layers such errors add up, and 1.0-2.8 % of the largest logit was measured on the tiny CNN,
  BERT, Gemma and Mistral (2026-11-27, CPU), so 5 % leaves room for depth without hiding a
  broken quantization (a wrong scale moves logits by tens of percent);
- float8 (e4m3, 3 mantissa bits: rounding up to 2^-4 = 6.25 % of a value), 0.15: 6.7 % measured
  on the CNN;
- int4 (groups of 128, 16 levels: half a step is ~7 % of a group's largest weight), 0.25: 14 %
  measured on the CNN.

Where the run also holds the float cell of the same row and environment (the same coordinates,
precision = the quantized cell's float base), the quantized cell's answer fingerprint is also
compared with that cell's under the same tolerance (answers.differences), a check that the
worker's own float model is the one the float cell measured.

Top-1 agreement is shown, never judged: random-weight models' logits sit close together (the
tiny CNN's ten logits within ~0.2 of each other), so a flipped argmax says little there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...worker.catalog import float_base, quantized_mode
from ..formatting import fmt, percent

TOLERANCES = {"int8": 5e-2, "int8_weight_only": 5e-2, "float8": 0.15, "int4": 0.25}
# First generated tokens compared exactly between a quantized cell and another (answers.py).
TOKEN_PREFIX = {"int8": 1, "int8_weight_only": 1, "float8": 0, "int4": 0}
WITHIN, BEYOND, NOT_MEASURED = "within tolerance", "beyond tolerance", "not measured"
EMULATED_WHY = ("float8 emulated (no float8 matmul where it ran): its time is no measure of "
                "float8")


def summary_fields(ok: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A cell summary's quantization (what ran, bytes, error: the first ok repeat's) and whether
    its float8 was emulated."""
    for record in ok:
        ran = (record.get("effective") or {}).get("quantization")
        if isinstance(ran, dict):
            measured = (record.get("extra") or {}).get("quantization") or {}
            found = {**ran, **(measured if isinstance(measured, dict) else {})}
            return {"quantization": found,
                    "emulated": str(found.get("float8") or "").startswith("emulated")}
    return {"quantization": None, "emulated": False}


def verdict(quantization: Mapping[str, Any] | None) -> str | None:
    """within / beyond the mode's tolerance, not measured; None for a float cell."""
    if not quantization:
        return None
    error = quantization.get("error") or {}
    relative = error.get("relative_error")
    tolerance = TOLERANCES.get(str(quantization.get("mode")))
    if not isinstance(relative, (int, float)) or tolerance is None:
        return NOT_MEASURED
    return WITHIN if relative <= tolerance else BEYOND


def error_text(quantization: Mapping[str, Any] | None, brief: bool = False) -> str:
    """'int8: top-1 agreement 99.2 % (254 of 256), max logit error 0.00328 (1.61 % of the
    float32 logits' largest); within its tolerance 5 %'; '' for a float cell."""
    if not quantization:
        return ""
    mode, base = quantization.get("mode"), quantization.get("built_in")
    error = quantization.get("error") or {}
    if "non_finite" in error:
        return f"{mode}: {error['non_finite']} logits not finite"
    if error.get("max_abs_error") is None:
        return f"{mode}: error not measured"
    rows, agree = error.get("rows"), error.get("top1_agreement")
    agreed = f" ({round(agree * rows)} of {rows})" if rows and agree is not None else ""
    text = (f"{mode}: top-1 agreement {percent(agree)}{agreed}, max logit error "
            f"{fmt(error['max_abs_error'])} ({percent(error.get('relative_error'))} of the "
            f"{base} logits' largest)")
    if brief:
        return text
    judged = verdict(quantization)
    tolerance = TOLERANCES.get(str(mode))
    return f"{text}; {judged}" + (f" {percent(tolerance)}" if tolerance is not None else "")


def base_precision(summary: Mapping[str, Any]) -> str | None:
    """The float precision a quantized cell is compared with; None for a float cell."""
    precision = str(summary.get("precision"))
    return float_base(precision) if quantized_mode(precision) else None


def bytes_ratio(quantization: Mapping[str, Any] | None) -> float | None:
    """The model's bytes after quantizing over before (0.337: a third of the float model)."""
    if not quantization:
        return None
    before, after = quantization.get("model_bytes_before"), quantization.get("model_bytes_after")
    return after / before if before and after is not None else None
