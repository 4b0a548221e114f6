"""report.md's "Cost" section (a part of markdown.py's report, as markdown_parts.py): what each
stack costs per item, per million tokens, per epoch and per image at the run's list price,
rows × environments with the time's interval; what the run cost; its estimate against what it
took. Nothing without a price ([cost] in the matrix)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...cost.prices import stale_note
from ..analysis.report_model import ReportModel, TableView, cost_label
from ..formatting import best_text, cell_text, comparable_values, fmt, md_text, usd

TABLES = (("usd_per_1k_items", "USD per 1,000 items (the time per step × the GPUs the cell "
           "holds × the per-GPU price ÷ the items a step processes; 95 % interval from the "
           "time's)"),
          ("usd_per_1m_tokens", "USD per million generated tokens (generate: at the decode "
           "rate)"),
          ("usd_per_epoch", "USD per epoch (fit: one epoch's time × the GPUs the cell holds × "
           "the per-GPU price)"),
          ("usd_per_image", "USD per image (Stable Diffusion)"))


def priced_table(view: TableView, key: str) -> list[str]:
    environments, rows, grid = view.environments, view.rows, view.grid
    lines = ["| Workload (task) | Batch size | " + " | ".join(map(md_text, environments)) + " |",
             "|---|---:|" + "---:|" * len(environments)]
    for label, batch in rows:
        cells: list[Mapping[str, Any] | None] = [grid.get((label, batch, e))
                                                 for e in environments]
        best = best_text(comparable_values(cells, key))
        texts = []
        for s in cells:
            text = cell_text(s, key, best)
            if s is not None and s.get(key) is not None:
                text = text.replace(fmt(s[key]), usd(s[key]))
                low, high = s.get(f"{key}_low"), s.get(f"{key}_high")
                if low is not None and high is not None:
                    text += f" ({usd(low)}–{usd(high)})"
            elif s is not None and s["status"] == "ok":
                text = "–"
            texts.append(text)
        lines.append(f"| {md_text(label)} | {batch} | " + " | ".join(texts) + " |")
    return lines


def estimate_lines(entry: Mapping[str, Any], stopped_by: str | None = None) -> list[str]:
    """The estimate before the run against what it took (all its sessions), and the cap that
    stopped it."""
    estimate = (entry.get("estimate") or {}).get("seconds")
    spent = entry.get("spent_s")
    if not estimate or spent is None:
        return []
    line = (f"The estimate before the run: {fmt(estimate['expected'])} s (from "
            f"{fmt(estimate['low'])} to {fmt(estimate['high'])} s); it took {fmt(spent)} s "
            "(environments, calibration and cells, every session")
    if entry.get("spent_usd") is not None:
        line += f"; {usd(entry['spent_usd'])} of the VM at list price"
    stopped = {"budget": f" It stopped at its budget of {usd(entry.get('budget'))}.",
               "max_hours": f" It stopped at its {entry.get('max_hours')} hours."}.get(
                   stopped_by or "", "")
    return [line + ")." + stopped, ""]


def cost_section(model: ReportModel) -> list[str]:
    manifest, summaries, price = model.manifest, model.summaries, model.price
    if price is None:
        return []
    out = ["## Cost (list-price estimates; lower is better; best in bold)", "",
           # The price table's strings (instance, region, provider, file, date) are a user's.
           f"Every figure: {md_text(cost_label(price))}. A list price, not a bill: discounts, "
           "storage and network are not in it.", ""]
    stale = stale_note(price.get("retrieved_at")) if price.get("source") == "price table" \
        else None
    if stale:
        out += [f"**Warning:** {md_text(stale)}.", ""]
    for key, title in TABLES:
        if any(s.get(key) is not None for s in summaries):
            out += [f"{title}:", "", *priced_table(model.cells_table, key), ""]
    spent = [float(v) for s in summaries if (v := s.get("usd")) is not None]
    if spent:
        out += [f"The cells' processes cost {usd(sum(spent))} in all (each process's wall time, "
                "start-up and compilation included, × the GPUs its cell holds × the per-GPU "
                "price). Cost never changes a verdict: faster and slower are the time's.", ""]
    return out + estimate_lines(manifest.get("cost") or {}, manifest.get("stopped_by"))
