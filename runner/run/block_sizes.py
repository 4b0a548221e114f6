"""A cell's block size (calls_per_sample) handed from its first repeat to every later one, or
from another run's same cell (`--blocks-from RUN_A`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..results.data.store import open_run
from ..results.data.types import Record
from ..schema.matrix import Cell
from .plan import Entry

# A block size that was measured, as opposed to one call per sample by design (a step that
# returns to the host): only these are handed on.
BLOCKED = ("calibrated", "handed_over")


@dataclass(frozen=True)
class HandedBlocks:
    """`--blocks-from RUN_A`: the block size each cell of run A timed, by cell name (ids hold
    the runner's version, names pair as compare pairs them). Run B hands A's size to its same
    cell instead of calibrating one, so the two runs time the same blocks: a cell that got 2×
    slower keeps A's block rather than calibrating half of it."""

    run: Path
    sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, run: Path) -> HandedBlocks:
        """A's block sizes (its ok records of blocked cells, the lowest repeat's); UsageError
        when the folder is not a run or holds no such record."""
        store, manifest = open_run(run)
        records, _ = store.read_records(manifest)
        sizes: dict[str, int] = {}
        for record in sorted(records, key=lambda r: r.get("repeat") or 0):
            size = record.get("calls_per_sample")
            if record.get("status") == "ok" and record.get("block_source") in BLOCKED \
                    and isinstance(size, int) and size >= 1:
                sizes.setdefault(str(record["cell_name"]), size)
        if not sizes:
            raise UsageError(f"--blocks-from {run}: no ok record of a cell timed in blocks")
        return cls(run, sizes)


class BlockSizes:
    """One block size per cell, as pyperf hands its calibrated loop count to every worker: the
    cell's first repeat to finish ok calibrates calls_per_sample, and every later repeat is
    handed it in its spec, so every repeat of a cell measures the same thing and takes as many
    samples. Known sizes come from the stored records too (--resume), and from another run's
    same cell (`handed`: --blocks-from), which then no repeat calibrates.

    In a parallel run a later repeat of a cell waits until the repeat calibrating the cell (its
    lowest repeat still to run) has finished; other cells' entries start meanwhile. If that
    repeat does not finish ok, the cell's next repeat calibrates instead. A serial run needs no
    waiting: the plan runs round 1 of every cell before round 2."""

    def __init__(self, stored: Sequence[Record], to_run: list[Entry],
                 given: int | None = None, handed: Mapping[str, int] | None = None):
        self.given = given                 # one size for every cell (Options.calls_per_sample)
        self.handed = dict(handed or {})   # cell name → size (Options.blocks_from)
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
        return self.given or self.handed.get(cell.name) or self.sizes.get(cell.id)

    def ready(self, entry: Entry) -> bool:
        """Whether the entry may start: its cell's size is known, or it calibrates it."""
        waiting = self.waiting.get(entry.cell.id) or [entry.key]
        return bool(self.given) or entry.cell.name in self.handed \
            or entry.cell.id in self.sizes or waiting[0] == entry.key

    def finished(self, entry: Entry, record: Record) -> None:
        keys = self.waiting.get(entry.cell.id, [])
        if entry.key in keys:
            keys.remove(entry.key)
        self._learn(record)
