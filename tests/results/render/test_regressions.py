"""`compare BASE NEW --fail-on-regression PERCENT` (render/regressions.py), the CI gate of
docs/layers.md, on the recorded fixture runs (tests/fixtures/make_runs.py): a planted 20 %
slowdown fails it with the regressed cells as a Markdown table, a rerun within noise passes,
a threshold above the slowdown passes, and a gate with nothing to judge does not pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results.render.regressions import parse_percent
from tests.fixtures import FIXTURE_RUNS


@pytest.fixture
def runs(tmp_path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(FIXTURE_RUNS, target)
    return target


def gate(runs: Path, a: str, b: str, *more: str) -> int:
    return cli.main(["compare", str(runs / a), str(runs / b), "--fail-on-regression", *more])


def test_a_planted_slowdown_fails_with_a_table_a_comment_can_take(runs, capsys):
    assert gate(runs, "base", "slower", "10%") == 1
    out = capsys.readouterr().out
    assert "**5 of 6 compared cells regressed by more than 10 %**" in out
    assert "| Cell | Batch size | Environment | A ms | B ms | B/A | p |" in out
    assert "| cnn (fit) | 128 | keras-jax |" in out
    written = (runs / "slower" / "regressions-base.md").read_text(encoding="utf-8")
    assert written.count("\n| ") == 6 and "| 1.20 |" in written     # header + 5 cells


def test_a_rerun_within_noise_passes(runs, capsys):
    assert gate(runs, "base", "same", "10%") == 0
    assert "**0 of 6 compared cells regressed by more than 10 %**" in capsys.readouterr().out


def test_a_slowdown_below_the_threshold_passes(runs):
    assert gate(runs, "base", "slower", "25%") == 0
    assert gate(runs, "base", "slower", "25") == 0                   # the % is optional


def test_a_gate_that_judges_nothing_does_not_pass(runs, capsys):
    # another driver on one side: no cell compares
    assert gate(runs, "base", "driver", "10%") == 2
    assert "nothing was judged" in capsys.readouterr().err


def test_bad_percents_and_two_thresholds_are_usage_errors(runs, capsys):
    assert gate(runs, "base", "slower", "ten") == 2
    assert "expected a percent" in capsys.readouterr().err
    assert cli.main(["compare", str(runs / "base"), str(runs / "slower"), "--threshold", "0.1",
                     "--fail-on-regression", "10%"]) == 2
    assert "not both" in capsys.readouterr().err
    assert parse_percent("12.5%") == pytest.approx(0.125)
    with pytest.raises(ValueError):
        parse_percent("-3%")
