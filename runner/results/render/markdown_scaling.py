"""report.md's "Scaling" section (analysis/scaling.py): per row of data-parallel cells, items/s
against devices for each environment and what each ran (strategy, all-reduce), the scaling
efficiency with its interval and the answer across device counts, its plot, and a finding."""

from __future__ import annotations

from typing import Any

from ..analysis.report_model import (SCALING_DIFFERENT, SCALING_SAME, SUPERLINEAR_NOTE,
                                     ScalingPoint as Point, ScalingRow, efficiency_text,
                                     scaling_findings, superlinear, without_interval)
from ..formatting import DIFFERENT_MARK, cell_text

DOCS = "docs/scaling.md"
ANSWER_MARKS = {SCALING_SAME: "✓", SCALING_DIFFERENT: DIFFERENT_MARK}
INTRO = ("Items/s: items per step (the global batch) ÷ the step time (the geometric mean of the "
         "repeat medians). Efficiency: items/s at N devices ÷ (N × items/s at one device), 1 "
         "being linear, with its 95 % interval (the two cells' Welch interval, scaled; none "
         "under 3 repeats a side). ✓: the cell's first-step loss (and answer) is its 1-device "
         f"cell's at the same global batch; {DIFFERENT_MARK}: it is not; –: not compared "
         f"(why in {DOCS}).")


def strategy_text(points: list[Point]) -> str:
    """What the environment's data-parallel cells ran (the first that says)."""
    for point in points:
        facts = point.cell.get("data_parallel") or {}
        if facts.get("strategy"):
            return f"{facts['strategy']} ({facts.get('all_reduce', '?')})"
    na = next((p for p in points if p.cell["status"] == "not_applicable" and p.devices > 1), None)
    return f"NA: {na.cell.get('error')}" if na is not None else "–"


def items_table(row: ScalingRow) -> list[str]:
    counts = row.devices
    lines = ["| Environment | Data-parallel strategy (all-reduce) | "
             + " | ".join(f"{n} device{'s' if n > 1 else ''}" for n in counts) + " |",
             "|---|---|" + "---:|" * len(counts)]
    for env, points in row.environments.items():
        cells = [cell_text(p.cell, "items_per_s", None) if (p := row.point(env, n)) else ""
                 for n in counts]
        lines.append(f"| {env} | {strategy_text(points)} | " + " | ".join(cells) + " |")
    return lines


def efficiency_cell(point: Point | None) -> str:
    if point is None:
        return ""
    if point.cell["status"] != "ok":
        return "NA" if point.cell["status"] == "not_applicable" else point.cell["status"]
    return f"{efficiency_text(point.efficiency)} {ANSWER_MARKS.get(point.answer, '–')}"


def efficiency_table(row: ScalingRow) -> list[str]:
    counts = row.devices[1:]
    lines = ["| Environment | " + " | ".join(f"{n} devices" for n in counts) + " |",
             "|---|" + "---:|" * len(counts)]
    for env in row.environments:
        lines.append(f"| {env} | " + " | ".join(efficiency_cell(row.point(env, n))
                                                for n in counts) + " |")
    return lines


def notes(row: ScalingRow) -> list[str]:
    """Why a cell's answer was not compared, or how it differs, one line each."""
    return [f"- {env} at {p.devices} devices: {p.answer}: {p.answer_detail}"
            for env, points in row.environments.items() for p in points
            if p.answer and p.answer != SCALING_SAME]


def scaling_part(report: Any) -> list[str]:
    """The section (none without a row of several device counts); reads the report model's
    scaling rows and the report's plots (plots_scaling.py drew them, titled by row)."""
    rows = report.model.scaling
    if not rows:
        return []
    drawn = {plot.title: plot.path for plot in report.plots or [] if plot.path}
    out = ["## Scaling", "", INTRO, ""]
    missing = without_interval(rows)
    if missing:
        out += [f"No interval: {missing}.", ""]
    for row in rows:
        title = f"{row.label}, batch {row.batch_size}"
        kind = "" if "scaling=" in row.label else f" ({row.scaling} scaling)"
        out += [f"### {title}{kind}", "", "Items/s:", "", *items_table(row),
                "", "Scaling efficiency:", "", *efficiency_table(row), ""]
        out += [*notes(row), ""] if notes(row) else []
        if any(superlinear(p.efficiency) for points in row.environments.values()
               for p in points):
            out += [SUPERLINEAR_NOTE, ""]
        if f"Scaling: {title}" in drawn:
            out += [f"![Scaling: {title}]({drawn[f'Scaling: {title}']})", ""]
        out += [f"Finding: {sentence}" for sentence in scaling_findings([row])] + [""]
    return out
