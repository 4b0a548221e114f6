"""Scaling: what a data-parallel cell gains from its devices (the devices axis; docs/scaling.md).

A scaling row is a row of the report less its device count: one workload, task, batch size and
setting of every other axis (weak or strong scaling included), and per environment its cells at
each device count. For each cell:

- items/s: its items per step (the global batch) at its time, the geometric mean of its repeat
  medians (the estimator of every ratio);
- scaling efficiency at N devices: items/s at N ÷ (N × items/s at 1), 1 being linear. It is the
  ratio of the two cells' times (effects.speedup: the Welch interval on the logs of their repeat
  medians) times a known constant, items_N ÷ (N × items_1), so its 95 % interval is that ratio's,
  scaled; none with fewer than 3 repeats a side. Where a row has no 1-device cell its smallest
  count is the baseline (N ÷ that count in place of N);
- its answer across device counts: the first step's loss (and its other fingerprints) against
  the 1-device cell of its environment that ran the same global batch (strong scaling: the
  row's own; weak: the cell at batch_size × N, where the run has one), within the answer
  check's tolerance (answers.py): an all-reduce that sums where it should average, or a shard
  that is trained twice, moves it. A step that draws dropout masks is not compared.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..data.types import CellSummary
from . import answers
from .effects import coordinates, speedup
from .ratios import Ratio
from .summaries import row_label

SAME, DIFFERENT, NOT_COMPARED = "same", "different", "not compared"


@dataclass
class Point:
    """One cell of a scaling row."""

    devices: int
    cell: CellSummary
    efficiency: Ratio | None = None        # None at the baseline and where a side did not run
    answer: str = ""                       # SAME, DIFFERENT, NOT_COMPARED ("" at 1 device)
    answer_detail: str = ""

    @property
    def items_per_s(self) -> float | None:
        return self.cell.get("items_per_s") if self.cell["status"] == "ok" else None


@dataclass
class ScalingRow:
    label: str                              # the row's label without its devices
    batch_size: int
    devices: list[int]                      # every count the row has, ascending
    environments: dict[str, list[Point]] = field(default_factory=dict)

    def point(self, environment: str, devices: int) -> Point | None:
        return next((p for p in self.environments.get(environment, [])
                     if p.devices == devices), None)

    @property
    def scaling(self) -> str:
        return next(p.cell.get("scaling") or "weak" for points in self.environments.values()
                    for p in points)


def devices_of(cell: CellSummary) -> int:
    return int(cell.get("devices") or 1)


def scaling_rows(summaries: list[CellSummary]) -> list[ScalingRow]:
    """The run's rows with more than one device count, in the run's order."""
    groups: dict[tuple[str, int], list[CellSummary]] = defaultdict(list)
    for cell in summaries:
        groups[(row_label(cell, without="devices"), cell["batch_size"])].append(cell)
    rows = []
    for (label, batch), cells in groups.items():
        counts = sorted({devices_of(c) for c in cells})
        if len(counts) < 2:
            continue
        row = ScalingRow(label, batch, counts)
        for cell in cells:
            row.environments.setdefault(cell["environment"], []).append(
                Point(devices_of(cell), cell))
        for points in row.environments.values():
            points.sort(key=lambda p: p.devices)
            measure(points, summaries)
        rows.append(row)
    return rows


def measure(points: list[Point], summaries: list[CellSummary]) -> None:
    """Each point's efficiency against the environment's smallest count, and its answer."""
    base = points[0]
    for point in points[1:]:
        point.answer, point.answer_detail = answer_across(point.cell, summaries)
        if base.items_per_s is None or point.items_per_s is None:
            continue
        factor = (point.cell.get("items_per_step") or 0) / (base.cell.get("items_per_step") or 1)
        point.efficiency = speedup(base.cell, point.cell).scaled(
            factor * base.devices / point.devices)


def global_batch(cell: CellSummary) -> int:
    facts = cell.get("data_parallel") or {}
    if facts.get("global_batch"):
        return int(facts["global_batch"])
    weak = (cell.get("scaling") or "weak") == "weak"
    return cell["batch_size"] * devices_of(cell) if weak else cell["batch_size"]


IGNORED = ("devices", "scaling", "batch_size")


def reference(cell: CellSummary, summaries: list[CellSummary]) -> CellSummary | None:
    """The 1-device cell of the cell's environment, everything else the same, at its global
    batch."""
    where = {k: v for k, v in coordinates(cell).items() if k not in IGNORED}
    for other in summaries:
        if other["environment"] == cell["environment"] and devices_of(other) == 1 and \
                other["workload"] == cell["workload"] and other["task"] == cell["task"] and \
                other["batch_size"] == global_batch(cell) and other["status"] == "ok" and \
                {k: v for k, v in coordinates(other).items() if k not in IGNORED} == where:
            return other
    return None


def fingerprint(cell: CellSummary) -> dict[str, Any]:
    """What a cell computed that another device count must compute too: its answer, and its
    first step's loss unless the step draws random numbers (answer_note says so)."""
    found = dict(cell.get("answer") or {})
    if cell.get("loss_first") is not None and not cell.get("answer_note"):
        found["first_step_loss"] = cell["loss_first"]
    return found


def answer_across(cell: CellSummary, summaries: list[CellSummary]) -> tuple[str, str]:
    if cell["status"] != "ok":
        return "", ""
    ref = reference(cell, summaries)
    if ref is None:
        return NOT_COMPARED, f"no 1-device cell at its global batch {global_batch(cell)} ran"
    a, b = fingerprint(ref), fingerprint(cell)
    if not a or not b:
        return NOT_COMPARED, cell.get("answer_note") or "no answer recorded"
    kind = max(answers.arithmetic(ref), answers.arithmetic(cell),
               key=lambda k: answers.TOLERANCES[k])
    found, compared = answers.differences(a, b, kind)
    if not compared:
        return NOT_COMPARED, "nothing in common to compare"
    if found:
        return DIFFERENT, "; ".join(found)
    return SAME, f"as the 1-device cell at batch {ref['batch_size']}"


def findings(rows: list[ScalingRow]) -> list[str]:
    """A sentence per row: each environment's efficiency at its largest measured count, with
    its interval; then every cell whose answer moved with the devices."""
    out = []
    for row in rows:
        said = []
        for env, points in row.environments.items():
            measured = [p for p in points if p.efficiency is not None
                        and p.efficiency.ratio is not None]
            if measured:
                last = measured[-1].efficiency
                said.append(f"{env} {efficiency_text(last)} at {measured[-1].devices} devices"
                            + (" (superlinear: usually a thread or cache effect)"
                               if superlinear(last) else ""))
        if said:
            out.append(f"{row.label}, batch {row.batch_size}: of linear scaling, "
                       + ", ".join(said) + ".")
        out += [f"{row.label}, batch {row.batch_size}: {env} at {p.devices} devices computed a "
                f"different answer from one device ({p.answer_detail})."
                for env, points in row.environments.items() for p in points
                if p.answer == DIFFERENT]
    return out


# Efficiency above 1: N devices did more than N times one device's work, which data parallelism
# cannot do by itself; the usual cause is the host's threads or a cache (a device's share of
# the batch fits a cache the whole batch did not, or the one-device cell ran with fewer or
# busier host threads), and the report says so.
SUPERLINEAR_MARK = "‼"
SUPERLINEAR_NOTE = (f"{SUPERLINEAR_MARK} superlinear (efficiency above 1): more than N times "
                    "one device's work, which data parallelism does not do by itself — usually "
                    "a thread or cache effect (a device's share of the batch fits a cache the "
                    "whole batch did not, or the one-device cell had fewer or busier host "
                    "threads), not the framework scaling better than linear.")


def superlinear(ratio: Ratio | None) -> bool:
    return ratio is not None and ratio.ratio is not None and ratio.ratio > 1


def efficiency_text(ratio: Ratio | None) -> str:
    """0.91 (95 % CI 0.88–0.94); 0.91 (no interval) where a side has under 3 repeats; above 1
    marked SUPERLINEAR_MARK."""
    if ratio is None or ratio.ratio is None:
        return "–"
    mark = f" {SUPERLINEAR_MARK}" if superlinear(ratio) else ""
    if ratio.has_interval:
        return f"{ratio.ratio:.2f}{mark} (95 % CI {ratio.low:.2f}–{ratio.high:.2f})"
    return f"{ratio.ratio:.2f}{mark} (no interval)"


def without_interval(rows: list[ScalingRow]) -> str | None:
    """Why some efficiency has no interval (the first reason found), or None."""
    return next((p.efficiency.why for row in rows for points in row.environments.values()
                 for p in points if p.efficiency is not None and p.efficiency.ratio is not None
                 and not p.efficiency.has_interval), None)
