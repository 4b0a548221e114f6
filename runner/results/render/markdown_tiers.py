"""report.md's "Defaults and tuned" (docs/tuned.md): per row and environment, the defaults cell
beside the tuned one — both re-measured in fresh repeats, never a probe's time — the gain with
its interval, the knobs the tuning chose and what it took."""

from __future__ import annotations

from ..analysis.report_model import (TIER_BATCH_KNOB, TIER_NO_GAIN, TIER_SLOWER, TIME_KEY,
                                     TierPair, knobs_text)
from ..formatting import fmt, md_code, md_text
from .markdown_parts import ratio_text

HEAD = ("| Workload (task) | Batch size | Environment | Defaults ms/step | Tuned ms/step | "
        "Gain (defaults ÷ tuned) | Knobs chosen | Tuning |")


def _tuning(pair: TierPair) -> str:
    entry = pair.tuning
    if not entry:
        return "–"
    if entry.get("status") == "no knobs":
        return "no knobs apply: its tuned cell is its defaults"
    spent = (f"{fmt(entry.get('minutes'))} of {fmt(entry.get('budget_minutes'))} min, "
             if entry.get("budget_minutes") else f"{fmt(entry.get('minutes'))} min, ")
    usd = f", ${fmt(entry['usd'])}" if entry.get("usd") is not None else ""
    return f"{spent}{entry.get('probes', 0)} probes{usd} ({entry.get('status')})"


def _time(cell, per_item: bool = False, batch: int | None = None) -> str:
    """A cell's ms/step, or its items/s (and the batch it ran) where the batch was searched."""
    if cell is None:
        return "–"
    if cell["status"] != "ok":
        return md_text(str(cell["status"]))
    if not per_item:
        return fmt(cell.get(TIME_KEY))
    time, items = cell.get(TIME_KEY), cell.get("items_per_step")
    rate = f"{fmt(items / time * 1000.0)} items/s" if time and items else "–"
    return rate + (f" (batch {batch})" if batch is not None else "")


def tiers_section(pairs: list[TierPair]) -> list[str]:
    """The section of the report model's tier pairs (analysis/tiers.py)."""
    if not pairs:
        return []
    lines = ["## Defaults and tuned", "",
             "Each environment at its defaults and at the knobs `python -m runner tune` chose "
             "for it within the same budget (the models, weights, optimizer, shapes, batch and "
             "precision class unchanged; docs/tuned.md). Both cells are re-measured here in "
             "fresh repeats like every cell: the probes' own times, selected from several, "
             "never reach a table. Gain: the defaults' time ÷ the tuned time with its 95 % "
             "interval; **no gain** where the interval covers 1 (the tuning found nothing the "
             "repeats tell from the defaults). Where the tuning searched the batch "
             "([tuning] batch = \"max\"), both cells are given in items/s and the gain is "
             "tuned ÷ defaults items/s: their steps hold other batches.", "", HEAD,
             "|---|---:|---|---:|---:|---:|---|---|"]
    for pair in pairs:
        gain = ratio_text(pair.gain)
        if pair.verdict == TIER_NO_GAIN:
            gain += " **no gain**"
        elif pair.verdict == TIER_SLOWER:
            gain += " **slower**"
        label, batch = pair.row
        knobs = md_text(knobs_text(pair.knobs)) if pair.tuning.get("knobs") is not None \
            or pair.knobs else "–"
        lines.append(f"| {md_text(label)} | {batch} | {md_text(pair.environment)} | "
                     f"{_time(pair.defaults, pair.per_item)} | "
                     f"{_time(pair.tuned, pair.per_item, pair.knobs.get(TIER_BATCH_KNOB))} | "
                     f"{gain}{' (items/s)' if pair.per_item else ''} | {knobs}"
                     f" | {md_text(_tuning(pair))} |")
    sources = sorted({str(p.tuning["source"]) for p in pairs if p.tuning.get("source")})
    if sources:     # the probes' own times never reach a table; where they are listed, whole
        lines += ["", "Every probe (its knobs, its status or why it was pruned, ms/step, compile "
                  "time, peak memory, the answer check) is listed in its tuning's folder: "
                  + ", ".join(md_code(f"{s}/tuning/<cell id>/probes.jsonl") for s in sources)
                  + "."]
    return lines + [""]
