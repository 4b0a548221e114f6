"""`runner compare` on the recorded fixture runs (tests/fixtures/make_runs.py says what they hold)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner import cli, compare
from runner.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
MEASURED = 6  # ok cells in every fixture run; the failed cell is never comparable


@pytest.fixture
def runs(tmp_path) -> Path:
    """Copies of the fixture runs, so that compare-*.md lands in a temporary folder."""
    target = tmp_path / "runs"
    shutil.copytree(FIXTURES, target)
    return target


def verdicts(comparison: compare.Comparison) -> dict[str, str]:
    return {c.cell_id: c.verdict for c in comparison.cells}


def test_identical_runs_are_the_same(runs):
    result = compare.compare_runs(runs / "base", runs / "base")
    assert result.count(compare.SAME) == MEASURED
    assert result.geometric_mean_ratio == pytest.approx(1.0)
    assert result.exit_code == 0
    notes = {c.cell_id: c.reason for c in result.cells}
    assert notes["m2mmkrjax0"] == "caution: warnings in A and B (see report.md)"  # CV > 5 %
    assert notes["f2cnnkrjax"] == ""


def test_a_rerun_with_fresh_noise_is_the_same(runs):
    result = compare.compare_runs(runs / "base", runs / "same")
    assert result.count(compare.SAME) == MEASURED
    assert result.count(compare.SLOWER) == result.count(compare.FASTER) == 0
    assert result.geometric_mean_ratio == pytest.approx(1.0, abs=0.03)


def test_twenty_percent_slower_is_slower_and_exit_1(runs, capsys):
    result = compare.compare_runs(runs / "base", runs / "slower")
    assert result.count(compare.SLOWER) == MEASURED
    assert all(c.p_value < 0.001 for c in result.comparable)
    assert result.geometric_mean_ratio == pytest.approx(1.2)
    code = cli.main(["compare", str(runs / "base"), str(runs / "slower")])
    assert code == 1
    written = (runs / "slower" / "compare-base.md").read_text(encoding="utf-8")
    assert "6 slower" in written and "| **slower** |" in written
    assert "geometric mean of B/A over 6 comparable cells: 1.200" in capsys.readouterr().out


def test_faster_in_the_other_direction_exits_0(runs, tmp_path):
    target = tmp_path / "out.md"
    code = cli.main(["compare", str(runs / "slower"), str(runs / "base"), "--markdown", str(target)])
    assert code == 0
    assert "6 faster" in target.read_text(encoding="utf-8")


def test_threshold_decides_practical_significance(runs):
    # 20 % slower is still "the same" when only a change above 25 % matters
    result = compare.compare_runs(runs / "base", runs / "slower", threshold=0.25)
    assert result.count(compare.SAME) == MEASURED and result.exit_code == 0


def test_differing_driver_is_not_comparable(runs):
    result = compare.compare_runs(runs / "base", runs / "driver")
    assert result.count(compare.NOT_COMPARABLE) == len(result.cells)
    cell = next(c for c in result.cells if c.cell_id == "f2cnnkrjax")
    assert cell.differing_keys == ["driver_version"]
    assert "driver_version 550.54.15 → 560.35.03" in cell.reason
    assert result.geometric_mean_ratio is None and result.exit_code == 0


def test_failed_and_missing_cells_are_not_comparable(runs):
    (runs / "same" / "cells" / "m1mmjax000-r1.json").unlink()  # one repeat less: still fine
    for path in (runs / "same" / "cells").glob("f3cnnkrs2x-*.json"):
        path.unlink()                                           # the whole cell missing in B
    result = compare.compare_runs(runs / "base", runs / "same")
    by_id = {c.cell_id: c for c in result.cells}
    assert by_id["m3mmkrtf00"].reason == "status A failed, B failed"
    assert by_id["f3cnnkrs2x"].reason == "only in run A"
    assert by_id["m1mmjax000"].verdict == compare.SAME and by_id["m1mmjax000"].samples_b == 40
    assert "m4mmkrs200" not in by_id  # not applicable on both sides: nothing to compare


def test_too_few_samples_is_not_comparable(runs):
    for path in (runs / "same" / "cells").glob("f1cnnkrtf0-*.json"):
        record = json.loads(path.read_text())
        record["samples_ms"] = record["samples_ms"][:1]
        path.write_text(json.dumps(record))
    cell = next(c for c in compare.compare_runs(runs / "base", runs / "same").cells
                if c.cell_id == "f1cnnkrtf0")
    assert cell.verdict == compare.NOT_COMPARABLE and cell.reason.startswith("too few samples (60 vs 3")


def test_bad_input_is_a_usage_error(runs, tmp_path, capsys):
    with pytest.raises(UsageError):
        compare.compare_runs(tmp_path, runs / "base")
    assert cli.main(["compare", str(tmp_path / "nowhere"), str(runs / "base")]) == 2
    assert cli.main(["compare", str(runs / "base")]) == 2
    assert cli.main(["compare", str(runs / "base"), str(runs / "same"), "--alpha", "2"]) == 2
    err = capsys.readouterr().err
    assert "no such run folder" in err and "--alpha" in err
    assert not (tmp_path / "logs").exists()  # comparing never writes into a folder it rejects
