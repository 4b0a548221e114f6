"""Cells × repeats → an ordered plan: rounds interleaved across environments, finished ones
skipped, not-applicable ones listed (never silently dropped)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from ..schema.matrix import Cell


@dataclass(frozen=True)
class Entry:
    cell: Cell
    repeat: int  # 1-based

    @property
    def key(self) -> str:
        return f"{self.cell.id}-r{self.repeat}"


@dataclass
class Plan:
    to_run: list[Entry] = field(default_factory=list)
    done: list[Entry] = field(default_factory=list)          # finished in the resumed run
    not_applicable: list[Cell] = field(default_factory=list)
    filtered_out: int = 0
    cells: list[Cell] = field(default_factory=list)           # the planned cells, matrix order


def matches(cell: Cell, patterns: list[str]) -> bool:
    """--only: a glob or a substring of the cell name, or the cell id."""
    for pattern in patterns:
        if cell.id == pattern or pattern in cell.name or fnmatch.fnmatch(cell.name, pattern):
            return True
    return False


def make_plan(cells: list[Cell], only: list[str] | None = None,
              finished: set[str] | None = None) -> Plan:
    """Round k of every cell before round k+1 of any, so slow drift of the machine (thermal,
    other load) spreads over all environments instead of biasing the last ones."""
    plan = Plan()
    finished = finished or set()
    selected = []
    ids = set(only or ())          # `reproduce` names every cell by id: one set lookup each
    for cell in cells:
        if only and cell.id not in ids and not matches(cell, only):
            plan.filtered_out += 1
        elif cell.not_applicable:
            plan.not_applicable.append(cell)
        else:
            selected.append(cell)
    plan.cells = selected
    rounds = max((c.repeats for c in selected), default=0)
    for repeat in range(1, rounds + 1):
        for cell in selected:
            if repeat <= cell.repeats:
                entry = Entry(cell, repeat)
                (plan.done if entry.key in finished else plan.to_run).append(entry)
    return plan
