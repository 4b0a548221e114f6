"""A run's pace with a clock the test moves: [k/N] and the finish time corrected by the cells
done so far; the budget and --max-hours stops before the cell × repeat that would pass them,
with what the continue command should carry; a resume's spending carried."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from runner.cost.estimate import Estimate, Span
from runner.cost.pricing import RunPrice
from runner.run.pace import Pace


@dataclass(frozen=True)
class Cell:
    name: str


@dataclass(frozen=True)
class Entry:
    cell: Cell
    repeat: int = 1

    @property
    def key(self) -> str:
        return f"{self.cell.name}-r{self.repeat}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def planned(n: int, seconds: float = 10.0, lanes: int = 1):
    entries = [Entry(Cell(f"c{i}")) for i in range(n)]
    spans = {e.key: Span(seconds / 2, seconds, seconds * 2) for e in entries}
    cells = Span(*(sum(getattr(s, k) for s in spans.values()) for k in ("low", "expected",
                                                                        "high")))
    return entries, Estimate(spans, cells, Span(), Span(), lanes)


PRICE = RunPrice(usd_per_hour=3600.0, gpus=4, pricing="on_demand", source="price_per_hour")


def test_each_line_counts_and_says_when_the_run_should_finish():
    entries, estimate = planned(4)
    clock = Clock()
    pace = Pace(entries, estimate, None, {}, clock=clock)
    assert pace.gate(entries[0]) is None
    clock.now += 20.0                        # the first cell took twice its estimate
    text = pace.finish(entries[0])
    assert text.startswith("[1/4] finish ~") and text.endswith("(60 s left)")   # 3 × 10 × 2
    assert re.search(r"~\d\d:\d\d ", text)
    for entry in entries[1:]:
        assert pace.gate(entry) is None
        clock.now += 10.0
        text = pace.finish(entry)
    assert text == "[4/4]"


def test_a_resumed_run_counts_from_what_was_done():
    entries, estimate = planned(2)
    pace = Pace(entries, estimate, None, {}, done_before=5, clock=Clock())
    pace.gate(entries[0])
    assert pace.finish(entries[0]).startswith("[6/7] ")


def test_the_budget_stops_before_the_cell_that_would_pass_it():
    # $1 a second for the VM; each run is estimated at 10 s ($10); the budget $35: three runs
    # fit (spent 0, 10, 20 before each, + 10), the fourth would take it to $40.
    entries, estimate = planned(6)
    clock, stops = Clock(), []
    manifest: dict = {}
    pace = Pace(entries, estimate, PRICE, manifest, budget=35.0, clock=clock,
                on_stop=lambda by, wanted: stops.append((by, wanted)))
    ran = 0
    for entry in entries:
        reason = pace.gate(entry)
        if reason is not None:
            break
        clock.now += 10.0
        pace.finish(entry)
        ran += 1
    assert ran == 3
    assert reason.startswith("budget $35.00: $30.00 spent, the next run (c3 r1, ~$10.00) "
                             "would pass it; the rest is estimated at $30.00")
    assert manifest["stopped_by"] == "budget" and pace.stopped_by == "budget"
    assert stops == [("budget", pytest.approx(66.0))]     # (30 + 30) × 1.1, to the cent
    assert manifest["cost"]["spent_s"] == 30.0 and manifest["cost"]["spent_usd"] == 30.0


def test_a_resume_carries_what_was_spent():
    entries, estimate = planned(3)
    clock = Clock()
    pace = Pace(entries, estimate, PRICE, {}, budget=35.0, carried_s=30.0, clock=clock)
    assert pace.gate(entries[0]) is not None           # $30 carried + $10 > $35
    pace = Pace(entries, estimate, PRICE, {}, budget=66.0, carried_s=30.0, clock=clock)
    assert all(pace.gate(e) is None for e in entries[:1])


def test_max_hours_stops_without_a_price():
    entries, estimate = planned(3, seconds=1800.0)
    clock = Clock()
    pace = Pace(entries, estimate, None, {}, max_hours=0.9, clock=clock)
    assert pace.gate(entries[0]) is None
    clock.now += 1800.0
    pace.finish(entries[0])
    reason = pace.gate(entries[1])
    assert reason is not None and reason.startswith("--max-hours 0.9: 30 min spent, the next "
                                                    "run (c1 r1, ~30 min) would pass it")
    assert pace.stopped_by == "max_hours"


def test_a_records_usd_is_its_share_of_the_vm():
    pace = Pace([], None, PRICE, {}, clock=Clock())
    assert pace.usd_per_s() == pytest.approx(0.25)     # $3600/h for 4 GPUs: $0.25 a second


def test_a_wide_cell_pays_for_its_gpus_and_counts_its_share_of_the_lanes():
    """Issue 59 item 2: a record's rate is the per-GPU share × the GPUs the cell holds, and
    the budget's and the finish time's share of a process is its time × its lanes ÷ the
    run's (before: one GPU's rate, and the time ÷ the lanes whatever it held)."""
    entries, estimate = planned(2, lanes=4)
    estimate.widths[entries[1].key] = 4
    pace = Pace(entries, estimate, PRICE, {}, clock=Clock())
    assert pace.usd_per_s(4) == pytest.approx(4 * pace.usd_per_s())
    assert pace.usd_per_s() == pytest.approx(PRICE.per_gpu_usd_per_hour / 3600)
    assert pace.run_s(entries[0]) == pytest.approx(10.0 / 4)
    assert pace.run_s(entries[1]) == pytest.approx(10.0)
