"""A scan's days in the history (runner/history/days.py): a synthetic history of 16 days of one
nightly channel, two levels planted (a slowdown on the 7th day, a second on the 12th, where a
dependency moved with the build); both change points are named between the right days, in
build order whatever the order the runs were made in."""

from __future__ import annotations

import datetime

import pytest

from runner.history import days as days_mod, db, ingest

from tests.history.runs import write_run

CELL = "cnn-fit-keras-jax-b128"
DAYS = 16
FIRST, SECOND = 6, 11          # the first day of each new level


def level(day: int) -> float:
    return 1.0 if day < FIRST else 1.25 if day < SECOND else 1.6


@pytest.fixture
def scanned(tmp_path):
    engine = db.open_history(f"sqlite:///{tmp_path / 'history.sqlite'}")
    made_in = [(day * 7) % DAYS for day in range(DAYS)]        # the runs made out of day order
    days = {}
    for day in range(DAYS):
        stamp = (datetime.date(2026, 10, 1) + datetime.timedelta(days=day)).isoformat()
        stack = {"keras-nightly": f"3.16.0.dev202610{day + 1:02d}04", "keras-hub": "0.32.0",
                 "numpy": "2.4.6" if day < SECOND else "2.5.0"}
        folder = write_run(tmp_path / "results", "scan", made_in[day], level=level(day),
                           noise=0.01, seed=day, distributions=stack)
        ingest.import_run(engine, folder)
        days[f"scan/{folder.name}"] = stamp
    yield engine, days
    engine.dispose()


def test_two_planted_change_points_are_named_between_their_days(scanned):
    engine, days = scanned
    found = [c for c in days_mod.day_changes(engine, [CELL], days)]
    assert [(c.day_before, c.day_after) for c in found] == [("2026-10-06", "2026-10-07"),
                                                           ("2026-10-11", "2026-10-12")]
    first, second = found
    assert abs(first.point.ratio - 1.25) < 0.03 and abs(second.point.ratio - 1.6 / 1.25) < 0.03
    assert first.point.ratio_low < 1.25 < first.point.ratio_high and first.point.slower
    assert first.change.distributions()["keras-nightly"] == ("3.16.0.dev2026100604",
                                                             "3.16.0.dev2026100704")
    assert first.others({"keras-nightly"}) == {}                    # the build alone moved
    assert second.others({"keras-nightly"}) == {"numpy": ("2.4.6", "2.5.0")}   # bisect's turn


def test_a_series_is_read_in_the_order_of_its_builds(scanned):
    engine, days = scanned
    points = days_mod.day_series(engine, CELL, days)
    assert [days[p.run_id] for p in points] == sorted(days.values())
    assert points[0].change is None
    assert points[1].change.distributions() == {"keras-nightly": ("3.16.0.dev2026100104",
                                                                  "3.16.0.dev2026100204")}


def test_too_few_days_name_nothing(scanned):
    engine, days = scanned
    three = dict(list(days.items())[:3])
    assert days_mod.day_changes(engine, [CELL], three) == []
