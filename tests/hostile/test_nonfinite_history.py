"""A history holding times that are no times (NaN, infinite, 1e308 s: a damaged or shared
database): the estimate leaves them out, so it stays a figure (never `nan h` or `$nan`) and the
budget still stops the run before a cell would pass it (before: the first cell ran, and the run
ended with exit 70 after it). The cells run in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

from runner import cli
from tests.hostile.test_hostile_runs import main, no_process_left_behind  # noqa: F401
from tests.hostile.test_signals_and_stops import BUDGET


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A history holding one budget-stopped run of BUDGET's cells (imported: a stopped run is
    not recorded by itself)."""
    folder = tmp_path_factory.mktemp("history")
    (folder / "m.toml").write_text(BUDGET)
    assert cli.main([str(folder / "m.toml"), "--results-dir", str(folder / "r")]) == 1
    (run,) = (folder / "r" / "hostile").iterdir()
    database = folder / "history.sqlite"
    assert cli.main(["history", "import", str(run), "--db", f"sqlite:///{database}"]) == 0
    return database


@pytest.mark.parametrize("wall", [math.nan, math.inf, 1e308])
def test_an_estimate_leaves_out_a_histories_non_finite_times(wall, history, tmp_path, capsys):
    matrix, results = tmp_path / "m.toml", tmp_path / "r"
    matrix.write_text(BUDGET)
    results.mkdir()
    database = results / "history.sqlite"                 # beside the run folders: the run's
    shutil.copy(history, database)
    with sqlite3.connect(database) as connection:         # every time made `wall`
        rows = connection.execute("SELECT id, summary FROM cells").fetchall()
        for row_id, summary in rows:
            connection.execute("UPDATE cells SET summary = ? WHERE id = ?",
                               (json.dumps({**json.loads(summary), "wall_s": wall}), row_id))
    assert rows
    code, out, err = main(capsys, matrix, "--results-dir", results)
    estimate = next(line for line in out.splitlines() if line.startswith("estimate: "))
    assert "nan" not in estimate and "inf" not in estimate, estimate
    assert "12 default" in " ".join(out.split()), out     # as if the history had none
    assert code == 1 and "stopped: budget $5.00" in out, out + err
