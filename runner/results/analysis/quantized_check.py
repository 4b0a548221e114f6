"""Each quantized cell beside the float cell of its row and environment (quantized.py says what
is judged and why): sets quantization_check, quantization_detail, quantization_base and
quantization_base_check on every summary (None and "" for float cells). Called by
answers.check, after the same-answer check of the rows, with its `differences`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...worker import catalog
from ..data.types import CellSummary
from . import quantized

# answers.differences: (a, b, tolerance kind) → (what differs, how many quantities compared)
Differences = Callable[[Mapping[str, Any], Mapping[str, Any], str], tuple[list[str], int]]


def _place(summary: Mapping[str, Any], precision: str | None) -> tuple[Any, ...]:
    """Where a cell sits but for its precision (set to `precision`)."""
    axes = tuple((k, repr(precision if k == "precision" else summary.get(k)))
                 for k in catalog.setting_axes())
    return (summary.get("environment"), summary.get("workload"), summary.get("task"),
            summary.get("batch_size"), axes,
            repr(sorted((summary.get("options") or {}).items())))


def check(summaries: list[CellSummary], differences: Differences) -> None:
    quantized_rows = any(quantized.base_precision(s) for s in summaries)
    by_place = {_place(s, s.get("precision")): s for s in summaries} if quantized_rows else {}
    for s in summaries:
        q = s.get("quantization")
        s["quantization_check"] = quantized.verdict(q) if s["status"] == "ok" else None
        s["quantization_detail"] = quantized.error_text(q) if s["status"] == "ok" else ""
        s["quantization_base"], s["quantization_base_check"] = None, ""
        base_precision = quantized.base_precision(s)
        if base_precision is None or s["status"] != "ok":
            continue
        base = by_place.get(_place(s, base_precision))
        if base is None or base["status"] != "ok":
            continue
        s["quantization_base"] = base["cell_name"]
        if not (base.get("answer") and s.get("answer")):
            s["quantization_base_check"] = "no answer to compare"
            continue
        mode = str(catalog.quantized_mode(s.get("precision")))
        found, compared = differences(base["answer"], s["answer"], mode)
        s["quantization_base_check"] = (
            "; ".join(found) if found else
            f"its answer agrees with {base['cell_name']}'s within the {mode} tolerance "
            f"({compared} quantities)" if compared else "nothing in common to compare")
