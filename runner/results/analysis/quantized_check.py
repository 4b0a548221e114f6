"""Each quantized cell beside the float cell of its row and environment (quantized.py says what
is judged and why): quantization_check, quantization_detail, quantization_base and
quantization_base_check for every summary (None and "" for float cells), by cell id. Called by
answers.check, after the same-answer check of the rows, with its `differences`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

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


class QuantizedCheck(TypedDict):
    quantization_check: str | None      # quantized.verdict: the error against its own float model
    quantization_detail: str            # quantized.error_text
    quantization_base: str | None       # the float cell of its row and environment (its name)
    quantization_base_check: str        # its answer against that cell's


def check(summaries: Sequence[CellSummary],
          differences: Differences) -> dict[str, QuantizedCheck]:
    """Every cell's quantized checks by cell id (the summaries are only read)."""
    quantized_rows = any(quantized.base_precision(s) for s in summaries)
    by_place = {_place(s, s.get("precision")): s for s in summaries} if quantized_rows else {}
    return {s["cell_id"]: _checked(s, by_place, differences) for s in summaries}


def _checked(s: CellSummary, by_place: Mapping[tuple[Any, ...], CellSummary],
             differences: Differences) -> QuantizedCheck:
    q = s.get("quantization")
    ok = s["status"] == "ok"
    out = QuantizedCheck(quantization_check=quantized.verdict(q) if ok else None,
                         quantization_detail=quantized.error_text(q) if ok else "",
                         quantization_base=None, quantization_base_check="")
    base_precision = quantized.base_precision(s)
    if base_precision is None or not ok:
        return out
    base = by_place.get(_place(s, base_precision))
    if base is None or base["status"] != "ok":
        return out
    out["quantization_base"] = base["cell_name"]
    if not (base.get("answer") and s.get("answer")):
        out["quantization_base_check"] = "no answer to compare"
        return out
    mode = str(catalog.quantized_mode(s.get("precision")))
    found, compared = differences(base["answer"], s["answer"], mode)
    out["quantization_base_check"] = (
        "; ".join(found) if found else
        f"its answer agrees with {base['cell_name']}'s within the {mode} tolerance "
        f"({compared} quantities)" if compared else "nothing in common to compare")
    return out
