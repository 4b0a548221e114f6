"""report.md's quantized tier (docs/quantized.md): one row per quantized cell beside the float
cell of its row and environment — its time and the speedup over that cell (never bold against
it: other work), the model's bytes before and after, the peak memory of both cells, and the
answer error with its verdict under the mode's tolerance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..analysis.report_model import QUANTIZED_TOLERANCES, TIME_KEY, Quantized, bytes_ratio
from ..formatting import EMULATED_MARK, fmt, md_code, md_text
from .markdown_parts import ratio_text

HEAD = ("| Cell | Precision | Against | ms/step | Speedup over the float cell | Model bytes "
        "(float → quantized) | Peak RSS MB (float → quantized) | Peak VRAM MB (float → "
        "quantized) | Answer error against its own float model | Its answer against the float "
        "cell's |")


def _bytes(q: Mapping[str, Any]) -> str:
    before, after = q.get("model_bytes_before"), q.get("model_bytes_after")
    ratio = bytes_ratio(q)
    shown = f"{fmt(before)} → {fmt(after)}"
    return shown + (f" (× {fmt(ratio)})" if ratio is not None else "")


def _pair(base: Mapping[str, Any] | None, cell: Mapping[str, Any], key: str) -> str:
    return f"{fmt(base.get(key)) if base else '–'} → {fmt(cell.get(key))}"


def quantized_section(cells: list[Quantized]) -> list[str]:
    """The section of the report model's quantized cells (report_model.quantized_cells)."""
    if not cells:
        return []
    lines = ["## Quantized tier", "",
             "Each quantized cell beside the float cell of its row and environment (same "
             "workload, batch, axes and options; precision = the float precision it was built "
             "in). Its speedup is that cell's time ÷ its own: a quantized cell does other work "
             "(other arithmetic, other answers), so it is never bold against a float cell, and "
             "its answer error stands beside it. The error is measured in the cell's own "
             "process: the model's logits on fixed inputs before and after quantizing (same "
             "weights, same backend); within tolerance when the largest logit error is at most "
             + ", ".join(f"{mode} {fmt(t * 100)} %" for mode, t in QUANTIZED_TOLERANCES.items())
             + " of the float logits' largest magnitude. "
             f"{EMULATED_MARK}: float8 emulated where it ran (its time is no measure of float8, "
             "and no ratio is given).", "", HEAD, "|---|---|---|---:|---:|---|---|---|---|---|"]
    for entry in cells:
        s, base, ratio = entry.cell, entry.base, entry.speedup
        q = s["quantization"] or {}
        time = fmt(s.get(TIME_KEY)) + (f" {EMULATED_MARK}" if s.get("emulated") else "")
        lines.append("| " + " | ".join([
            md_code(s["cell_name"], in_table=True),
            md_text(f"{s.get('precision')} ({q.get('library')})"),
            md_code(base["cell_name"], in_table=True) if base else "– (not in the run)",
            time,
            ratio_text(ratio) if ratio is not None else "–",
            _bytes(q), _pair(base, s, "rss_peak_mb"), _pair(base, s, "vram_peak_mb"),
            md_text(s.get("quantization_detail") or ""),
            md_text(s.get("quantization_base_check") or "–")]) + " |")
    layers = sorted({f"{md_text(q.get('library'))}: {md_text(q.get('config'))}"
                     for e in cells if (q := e.cell["quantization"] or {})})
    return lines + ["", "What ran (effective.quantization of each record: mode, library and "
                    "version, the layers quantized and the parameters in them):", "",
                    *[f"- {line}" for line in layers], ""]
