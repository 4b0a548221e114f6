"""The tuned tier's search for one cell (docs/tuned.md), apart from how a probe runs: successive
halving over the settings of the cell's knobs, or coordinate descent first where their grid is
large, within a budget of wall time.

- The candidates: every setting of the applicable knobs' values that can run (catalog/knobs.py:
  a knob whose axis would make the cell not applicable, or one that needs another knob on, is
  left out), the defaults first. Up to MAX_GRID of them are all probed; a larger grid is walked
  one knob at a time (each knob's values with the others at the best so far, in the record's
  order), and the walk's probes are the candidates.
- Rung 0 probes every candidate with a short window (window_s); each later rung re-probes the
  best half (at least two) with a window RUNG_GROWTH times longer, in fresh processes, until two
  are left and one of them wins. A probe that fails — out of memory, a compile failure, a
  timeout, a crash — or computes a different answer from the defaults' is pruned with its
  reason and never a winner.
- Budget: every probe's whole wall time counts (start-up, import, compilation and the window); a
  probe starts only while the time spent, plus the mean fixed cost of a probe so far and its
  window, fits the budget. When it runs out, the winner is the fastest probe of the highest rung
  that finished.

Probe times are the search's own, selected from several: never a table's number. The winner and
the defaults are re-measured as cells of a run (tier = "tuned" and "defaults").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..worker.catalog import Knob
from ..worker.catalog.knobs import grid

MAX_GRID = 12            # settings probed all at once; a larger grid is walked knob by knob
RUNG_GROWTH = 4          # each rung's window over the last's


@dataclass(frozen=True)
class Probe:
    """One probe as the search sees it: its setting (every knob's value), its rung and window,
    its status ("ok", else why it was pruned: "oom", "failed", "timeout", "crashed",
    "different answer"), its time per step, and the wall time it cost."""

    setting: dict[str, Any]
    rung: int
    window_s: float
    status: str
    ms: float | None = None
    wall_s: float = 0.0
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.ms is not None


@dataclass
class Outcome:
    """A search's end: the winner (None: no probe finished ok), every probe, and whether the
    budget cut it short."""

    winner: Probe | None
    probes: list[Probe] = field(default_factory=list)
    budget_spent: bool = False
    spent_s: float = 0.0

    @property
    def defaults(self) -> Probe | None:
        """The defaults' first probe (the answers' reference)."""
        return self.probes[0] if self.probes else None


class BudgetSpent(Exception):
    """The next probe would not fit the budget."""


RunProbe = Callable[[dict[str, Any], int, float], Probe]
Blocked = Callable[[dict[str, Any]], str | None]


def search(knobs: Sequence[Knob], device: str, blocked: Blocked, run_probe: RunProbe,
           budget_s: float, window_s: float, max_grid: int = MAX_GRID) -> Outcome:
    """The best setting of `knobs` for a cell: `run_probe(setting, rung, window_s)` runs one
    probe (a fresh process), `blocked(setting)` says why a setting cannot run."""
    outcome = Outcome(None)

    def probe(setting: dict[str, Any], rung: int) -> Probe:
        window = window_s * RUNG_GROWTH ** rung
        if outcome.probes:      # a probe's fixed cost so far (start, import, compile), + window
            fixed = sum(max(0.0, p.wall_s - p.window_s) for p in outcome.probes) \
                / len(outcome.probes)
            if outcome.spent_s + fixed + window > budget_s:
                raise BudgetSpent
        done = run_probe(setting, rung, window)
        outcome.probes.append(done)
        outcome.spent_s += done.wall_s
        return done

    settings = [s for s in grid(knobs, device) if blocked(s) is None]
    try:
        first = walk(knobs, device, blocked, probe) if len(settings) > max_grid \
            else [probe(s, 0) for s in settings]
        outcome.winner = halve(ranked(first), probe)
    except BudgetSpent:
        outcome.budget_spent = True
        top = max((p.rung for p in outcome.probes if p.ok), default=0)
        outcome.winner = next(iter(ranked([p for p in outcome.probes if p.rung == top])), None)
    return outcome


def ranked(probes: Sequence[Probe]) -> list[Probe]:
    """The probes that finished ok, fastest first (one per setting: its latest)."""
    latest = {key(p.setting): p for p in probes if p.ok}
    return sorted(latest.values(), key=lambda p: p.ms or math.inf)


def halve(survivors: list[Probe], probe: Callable[[dict[str, Any], int], Probe]) -> Probe | None:
    """Successive halving: the best half (at least two) again at the next rung, until two have
    been compared at the longest window; the fastest of those wins."""
    while len(survivors) > 1:
        keep = survivors[:max(2, math.ceil(len(survivors) / 2))]
        rung = keep[0].rung + 1
        survivors = ranked([probe(p.setting, rung) for p in keep])
        if len(keep) == 2:
            break
    return survivors[0] if survivors else None


def walk(knobs: Sequence[Knob], device: str, blocked: Blocked,
         probe: Callable[[dict[str, Any], int], Probe]) -> list[Probe]:
    """Coordinate descent over a large grid: from the defaults, each knob's other values with
    the rest at the best so far; returns every probe (rung 0)."""
    current = {k.name: k.default for k in knobs}
    best = probe(dict(current), 0)
    done = [best]
    for knob in knobs:
        for value in knob.values_on(device):
            setting = {**current, knob.name: value}
            if value == current[knob.name] or blocked(setting) is not None:
                continue
            done.append(probe(setting, 0))
        fastest = ranked([p for p in done if p.ok])
        if fastest:
            best = fastest[0]
            current = dict(best.setting)
    return done


def key(setting: Mapping[str, Any]) -> str:
    return repr(sorted(setting.items(), key=lambda item: item[0]))
