"""The tuned tier's batch search ([tuning] batch = "max", docs/tuned.md), for fit, predict and
run cells (catalog/knobs.py BATCH_SIZE), before their knobs are searched: the largest batch that runs, less a headroom.

- Doubling from the cell's own batch until a probe fails (out of memory, most often) or the
  ceiling ([tuning] max_batch_factor × the cell's batch) is reached;
- then bisecting between the largest batch that ran and the smallest that failed, until they
  are within an eighth of each other;
- then, where a batch failed, a headroom: the batch kept is HEADROOM of the largest that ran — memory that a process
  used at its peak once is not memory it can count on in every repeat (allocator
  fragmentation, another process's context) — rounded down to a multiple of 8 from 8 on, and
  never below the cell's own batch.

Every probe is a fresh process with the defaults' knobs and counts against the cell's budget
like the knobs' probes; no answer is compared across batches (the inputs differ): the knobs'
search that follows compares its probes with the defaults at the batch kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .tuning_search import Probe

HEADROOM = 0.9
BISECT_UNTIL = 8         # bisect until the bounds are within 1/BISECT_UNTIL of the lower one


@dataclass
class BatchOutcome:
    """The batch kept (None: not even the cell's own batch ran), the largest that ran, the
    smallest that failed (None: none failed below the ceiling), the probes, and whether the
    budget cut the search short."""

    chosen: int | None
    largest_ok: int | None
    smallest_failed: int | None
    probes: list[Probe] = field(default_factory=list)
    budget_spent: bool = False


def kept(largest_ok: int, start: int) -> int:
    """The headroom below the largest batch that ran (a multiple of 8 from 8 on), at least the
    cell's own batch."""
    batch = int(largest_ok * HEADROOM)
    if batch >= 8:
        batch -= batch % 8
    return max(start, min(batch, largest_ok))


def search_batch(start: int, ceiling: int, probe: Callable[[int], Probe],
                 fits: Callable[[], bool]) -> BatchOutcome:
    """The search from `start` (the cell's batch) to `ceiling`; `probe(batch)` runs one probe,
    `fits()` says whether another fits the budget."""
    probes: list[Probe] = []
    ok: int | None = None
    failed: int | None = None

    def run(batch: int) -> bool:
        found = probe(batch)
        probes.append(found)
        return found.ok

    batch = start
    while batch <= ceiling:
        if not fits():                 # nothing failed yet: no limit seen, no headroom
            return BatchOutcome(ok, ok, None, probes, True)
        if not run(batch):
            failed = batch
            break
        ok = batch
        batch *= 2
    if ok is None:
        return BatchOutcome(None, None, failed, probes)
    if failed is None:                 # the ceiling ran: no memory limit seen, no headroom
        return BatchOutcome(ok, ok, None, probes)
    while failed - ok > max(1, ok // BISECT_UNTIL):
        if not fits():
            return BatchOutcome(kept(ok, start), ok, failed, probes, True)
        middle = (ok + failed) // 2
        if run(middle):
            ok = middle
        else:
            failed = middle
    return BatchOutcome(kept(ok, start), ok, failed, probes)
