"""A scan's history: the runs of dated builds, one a day, read as a series by the day of the build
each measured (not by when it ran: a scan run backwards, or a gap filled later, still reads in
build order), and the change points between days (changepoints.py: PELT over the days' medians,
then the merge step's t-test and practical threshold), every one of them — a bisect between two
releases stops at the first and can hide a second.

Each change point names the last day of the old level and the first of the new, and the stack
diff between those two days' runs: the channel's own builds moved (keras-nightly A → B), and
anything else that moved with them (a dependency the new build asks for). Where only the
channel's builds moved, they are the culprit; where more moved, the bisect over distributions
(studies/bisect.py) finds which."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from . import changepoints
from .queries import Point, StackDiff, diff_stacks, series

MIN_DAYS = 2 * changepoints.MIN_SEGMENT      # fewer: no level can be told from another


@dataclass
class DayChange:
    """A change point of one cell between two days of a scan."""

    point: changepoints.ChangePoint
    day_before: str
    day_after: str
    run_before: str                    # the runs' ids
    run_after: str
    change: StackDiff                  # the day before's stack → the day after's

    @property
    def cell_name(self) -> str:
        return self.point.cell_name

    def others(self, builds: Collection[str]) -> dict[str, tuple[str | None, str | None]]:
        """What moved besides the channel's own `builds` (distribution names)."""
        return {n: v for n, v in self.change.distributions().items() if n not in builds}


def day_series(engine: Engine, cell_name: str, days: Mapping[str, str]) -> list[Point]:
    """The cell's points of the runs `days` names (run id → the day of its build), in the
    order of those days, each with the stack diff against the day before."""
    points = sorted((p for p in series(engine, cell_name) if p.run_id in days),
                    key=lambda p: (days[p.run_id], p.started_at or ""))
    for before, after in zip(points, points[1:], strict=False):
        after.change = diff_stacks(before.stack, after.stack)
    if points:
        points[0].change = None
    return points


def day_changes(engine: Engine, cell_names: Collection[str], days: Mapping[str, str],
                max_pvalue: float = changepoints.MAX_PVALUE,
                min_change: float = changepoints.MIN_MAGNITUDE) -> list[DayChange]:
    """Every change point of every cell between the days of a scan, in day order."""
    out = []
    for name in sorted(cell_names):
        points = day_series(engine, name, days)
        ok = [p for p in points if p.status == "ok" and p.median_ms]
        for found in changepoints.change_points(name, points, len(points), max_pvalue,
                                                min_change):
            before = ok[found.index - 1]
            out.append(DayChange(found, days[before.run_id], days[found.point.run_id],
                                 before.run_id, found.point.run_id,
                                 diff_stacks(before.stack, found.point.stack)))
    return sorted(out, key=lambda c: (c.day_after, c.cell_name))
