"""A run's pace as its cells go: `[k/N]` and the expected finish time on each cell's line (the
estimate's remaining time, corrected by how the cells done so far compare with theirs), what
the run has spent so far (its wall time, carried over resumes, × the VM's price), each record's
`usd`, and the budget and time caps: before each cell × repeat and each profiled pass, the run
stops when what it has spent plus that run's estimate would pass --budget (or [cost] budget) or
--max-hours."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..cost.estimate import Estimate, Span
from ..cost.pricing import RunPrice
from ..results.data.types import Manifest
from ..results.formatting import usd
from . import manifest as manifest_mod
from .plan import Entry

MIN_PACE, MAX_PACE = 0.25, 4.0     # how far the cells done so far may correct the estimate


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Pace:
    """The cells of one session of a run (a resume is a new session; `carried_s` is what the
    sessions before it took)."""

    def __init__(self, to_run: Sequence[Entry], estimate: Estimate | None,
                 price: RunPrice | None, manifest: Manifest, *, done_before: int = 0,
                 budget: float | None = None, max_hours: float | None = None,
                 carried_s: float = 0.0, on_stop: Callable[[str, float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.entries = list(to_run)
        self.estimate, self.price, self.manifest = estimate, price, manifest
        self.done_before, self.budget, self.max_hours = done_before, budget, max_hours
        self.carried_s, self.on_stop, self.clock = carried_s, on_stop, clock
        self.started = clock()
        self.first_cell: float | None = None
        self.finished: list[str] = []
        self.stopped_by: str | None = None

    # --- what the run has spent -------------------------------------------------------------

    def spent_s(self) -> float:
        return self.carried_s + (self.clock() - self.started)

    def spent_usd(self) -> float | None:
        return self.price.vm_usd_for(self.spent_s()) if self.price else None

    def usd_per_s(self, gpus: int = 1) -> float | None:
        """A record's rate: the share of the VM's price per second that the cell's `gpus` make
        (a data-parallel cell holds its devices' lanes: run/devices.py width)."""
        return self.price.per_gpu_usd_per_hour / 3600.0 * gpus if self.price else None

    def expected(self, entry: Entry) -> Span:
        if self.estimate is None:
            return Span()
        return self.estimate.entries.get(entry.key) \
            or self.estimate.profile_entries.get(entry.key, Span())

    def lanes(self) -> int:
        return self.estimate.lanes if self.estimate else 1

    def run_s(self, entry: Entry | str) -> float:
        """What the entry adds to the run's wall time: its process's estimate × the share of
        the lanes it holds (an 8-device cell on 8 lanes, a profiled pass: all of its time)."""
        key = entry if isinstance(entry, str) else entry.key
        if self.estimate is None:
            return 0.0
        span = self.estimate.entries.get(key) or self.estimate.profile_entries.get(key, Span())
        width = self.estimate.widths.get(key, 1)
        return span.expected * min(width, self.lanes()) / self.lanes()

    def left_s(self, after: Entry | None = None) -> float:
        """The estimate of what is not finished yet (from `after` on: the cells × repeats, then
        the profiled passes), over the lanes."""
        order = [e.key for e in self.entries] + \
            (list(self.estimate.profile_entries) if self.estimate else [])
        keys = set(self.finished)
        todo = order[order.index(after.key):] if after is not None and after.key in order \
            else order
        return sum(self.run_s(key) for key in todo if key not in keys)

    def record_spending(self) -> None:
        """The manifest's running figures (written with it: every write carries them)."""
        manifest_mod.add_spending(self.manifest, round(self.spent_s(), 1),
                                  None if self.price is None else round(self.spent_usd() or 0, 4))

    # --- before each cell × repeat: the caps ------------------------------------------------

    def gate(self, entry: Entry) -> str | None:
        """Why the run stops before `entry`, or None to go on."""
        if self.first_cell is None:
            self.first_cell = self.clock()
        self.record_spending()
        next_s = self.run_s(entry)
        spent_s = self.spent_s()
        name = f"{entry.cell.name} r{entry.repeat}" if entry.repeat else \
            f"{entry.cell.name}'s profiled pass"
        rest_s = self.left_s(entry)
        if self.budget is not None and self.price is not None:
            spent, following = self.price.vm_usd_for(spent_s), self.price.vm_usd_for(next_s)
            if spent + following > self.budget:
                rest = self.price.vm_usd_for(rest_s)
                wanted = math.ceil((spent + rest) * 1.1 * 100) / 100
                return self._stop("budget", wanted, (
                    f"budget {usd(self.budget)}: {usd(spent)} spent, the next run ({name}, "
                    f"~{usd(following)}) would pass it; the rest is estimated at {usd(rest)}"))
        if self.max_hours is not None and (spent_s + next_s) / 3600.0 > self.max_hours:
            wanted = math.ceil((spent_s + rest_s) * 1.1 / 360.0) / 10
            return self._stop("max_hours", wanted, (
                f"--max-hours {self.max_hours:g}: {duration_text(spent_s)} spent, the next run "
                f"({name}, ~{duration_text(next_s)}) would pass it; the rest is estimated at "
                f"{duration_text(rest_s)}"))
        return None

    def _stop(self, by: str, wanted: float, reason: str) -> str:
        self.stopped_by = by
        manifest_mod.add_stop(self.manifest, by)
        if self.on_stop is not None:
            self.on_stop(by, wanted)
        return reason

    # --- after each cell × repeat: its line ---------------------------------------------------

    def done(self, entry: Entry) -> None:
        """A profiled pass finished: what the run spent, written (no line of its own)."""
        if entry.key not in self.finished:
            self.finished.append(entry.key)
        self.record_spending()

    def finish(self, entry: Entry, record: dict[str, Any] | None = None) -> str:
        """`[k/N]` and the expected finish, for the cell's line."""
        if entry.key not in self.finished:
            self.finished.append(entry.key)
        self.record_spending()
        k, n = self.done_before + len(self.finished), self.done_before + len(self.entries)
        count = f"[{k}/{n}]"
        left = self.left_s()
        if left <= 0 or self.estimate is None:
            return count
        pace = 1.0
        done_expected = sum(self.run_s(e) for e in self.entries if e.key in set(self.finished))
        if self.first_cell is not None and done_expected > 0:
            taken = self.clock() - self.first_cell
            pace = min(MAX_PACE, max(MIN_PACE, taken / done_expected))
        left *= pace
        at = time.strftime("%H:%M", time.localtime(time.time() + left))
        return f"{count} finish ~{at} ({duration_text(left)} left)"
