"""A cell's block size (calls_per_sample) handed from its first repeat to every later one."""

from __future__ import annotations

from collections.abc import Sequence

from ..results.data.types import Record
from ..schema.matrix import Cell
from .plan import Entry


class BlockSizes:
    """One block size per cell, as pyperf hands its calibrated loop count to every worker: the
    cell's first repeat to finish ok calibrates calls_per_sample, and every later repeat is
    handed it in its spec, so every repeat of a cell measures the same thing and takes as many
    samples. Known sizes come from the stored records too (--resume).

    In a parallel run a later repeat of a cell waits until the repeat calibrating the cell (its
    lowest repeat still to run) has finished; other cells' entries start meanwhile. If that
    repeat does not finish ok, the cell's next repeat calibrates instead. A serial run needs no
    waiting: the plan runs round 1 of every cell before round 2."""

    def __init__(self, stored: Sequence[Record], to_run: list[Entry],
                 given: int | None = None):
        self.given = given                 # one size for every cell (Options.calls_per_sample)
        self.sizes: dict[str, int] = {}
        for record in sorted(stored, key=lambda r: r.get("repeat") or 0):
            self._learn(record)
        self.waiting: dict[str, list[str]] = {}     # cell id → keys still to run, repeat order
        for entry in sorted(to_run, key=lambda e: e.repeat):
            self.waiting.setdefault(entry.cell.id, []).append(entry.key)

    def _learn(self, record: Record) -> None:
        size = record.get("calls_per_sample")
        if record.get("status") == "ok" and isinstance(size, int) and size >= 1:
            self.sizes.setdefault(record["cell_id"], size)

    def size(self, cell: Cell) -> int | None:
        """The block size to hand this cell's next repeat; None: it calibrates its own."""
        return self.given or self.sizes.get(cell.id)

    def ready(self, entry: Entry) -> bool:
        """Whether the entry may start: its cell's size is known, or it calibrates it."""
        waiting = self.waiting.get(entry.cell.id) or [entry.key]
        return bool(self.given) or entry.cell.id in self.sizes or waiting[0] == entry.key

    def finished(self, entry: Entry, record: Record) -> None:
        keys = self.waiting.get(entry.cell.id, [])
        if entry.key in keys:
            keys.remove(entry.key)
        self._learn(record)
