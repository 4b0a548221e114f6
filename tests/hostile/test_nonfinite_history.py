"""A history holding times that are no times (NaN, infinite, 1e308 s: a damaged or shared
database): the estimate leaves them out, so it stays a figure (never `nan h` or `$nan`) and the
budget still stops the run before a cell would pass it (before: the first cell ran, and the run
ended with exit 70 after it). The cells run in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from tests.hostile.test_hostile_round4 import no_host_history_url  # noqa: F401
from tests.hostile.test_hostile_runs import main, no_process_left_behind  # noqa: F401
from tests.hostile.test_signals_and_stops import BUDGET


@pytest.mark.parametrize("wall", [math.nan, math.inf, 1e308])
def test_an_estimate_leaves_out_a_histories_non_finite_times(wall, tmp_path, capsys):
    matrix, results = tmp_path / "m.toml", tmp_path / "r"
    matrix.write_text(BUDGET)
    code, out, err = main(capsys, matrix, "--results-dir", results)
    assert code == 1, out + err                                   # stopped by its budget
    (run,) = (results / "hostile").iterdir()
    database = results / "history.sqlite"
    assert main(capsys, "history", "import", run, "--db", f"sqlite:///{database}")[0] == 0
    with sqlite3.connect(database) as connection:                 # every time made `wall`
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
