"""The history database as shared, damaged or foreign input: three runs creating one database
at once all record their runs; a damaged SQLite file is one line under `history list` and
`history regressions`; a database holding another application's tables is never written; and
`history site` draws failed cells and glyphs its font lacks without a warning. The cells run
in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from tests.hostile.helpers import HOST_PYTHON, copy_run, history_runs
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import hostile_matrix, main, one_line
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


# Each process first migrates a database in memory (every import, every migration script
# loaded), says it is ready, then waits for the word: the three then create the new database
# within a millisecond of each other (before the fix, two of three failed every time here).
AT_ONCE = """
import os, sys, time
from runner import cli
from runner.history import db
db.upgrade(db.engine_for("sqlite://"))
open(sys.argv[1] + ".ready-" + str(os.getpid()), "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
sys.exit(cli.main(sys.argv[2:]))
"""


def import_at_once(folder: Path, runs: list[Path], url: str) -> None:
    """`history import` of each run into `url`, one process each, started on one word once
    all are ready (AT_ONCE, its files in `folder`); each must end 0. PostgreSQL's twin of the
    race is tests/history/test_history.py's."""
    go = folder / "go"
    imports = [subprocess.Popen([HOST_PYTHON, "-c", AT_ONCE, str(go), "history", "import",
                                 str(run), "--db", url], cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for run in runs]
    deadline = time.monotonic() + 120
    while len(list(folder.glob("go.ready-*"))) < len(runs) and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    said = [p.communicate(timeout=120)[0] for p in imports]
    assert [p.returncode for p in imports] == [0] * len(runs), said


def test_three_imports_creating_one_history_at_once_record_every_run(finished_run, tmp_path):
    database = tmp_path / "history.sqlite"
    runs = [copy_run(finished_run, tmp_path / f"copy{i}", f"20260101T00000{i}Z")
            for i in range(3)]
    import_at_once(tmp_path, runs, f"sqlite:///{database}")
    assert history_runs(database) == [f"hostile/20260101T00000{i}Z" for i in range(3)]


@pytest.mark.parametrize("action", ["list", "regressions"])
def test_history_commands_on_a_damaged_sqlite_file_say_so_in_one_line(action, run_copy,
                                                                      tmp_path, capsys):
    database = tmp_path / "h.sqlite"
    assert main(capsys, "history", "import", run_copy, "--db", f"sqlite:///{database}")[0] == 0
    with sqlite3.connect(database) as connection:   # the schema and its version stay readable
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        roots = [row[0] for row in connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE tbl_name != 'alembic_version' AND "
            "rootpage > 1")]
    with database.open("r+b") as damaged:             # every other table's first page scribbled
        for root in roots:
            damaged.seek((root - 1) * page_size)
            damaged.write(b"\xff" * 64)
    line = one_line(*main(capsys, "history", action, "--db", f"sqlite:///{database}")[::2])
    assert line == f"error: history database sqlite:///{database}: database disk image is " \
                   "malformed"


def test_a_database_holding_another_applications_tables_is_never_written(tmp_path, capsys):
    theirs = tmp_path / "app.sqlite"
    with sqlite3.connect(theirs) as connection:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    before = theirs.read_bytes()
    (tmp_path / "m.toml").write_text(hostile_matrix(
        repeats=1, tables={"history": {"url": f"sqlite:///{theirs}"}}))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 0, out + err                     # the run is finished: a warning, not a failure
    assert f"! history: not recorded (HistoryError: history database sqlite:///{theirs}: it " \
           "holds tables that are not the runner's (users); a history needs a database of its " \
           "own)" in " ".join(out.split())
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    line = one_line(*main(capsys, "history", "import", run, "--db", f"sqlite:///{theirs}")[::2])
    assert "it holds tables that are not the runner's (users)" in line
    assert theirs.read_bytes() == before


def test_history_site_writes_no_warning_for_failed_cells_or_glyphs_its_font_lacks(tmp_path,
                                                                                 capsys):
    (tmp_path / "m.toml").write_text(hostile_matrix(
        1.0, repeats=1, options={"behaviour": ["ok", "fail"], "marker": "中文 😀"}))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1, out + err                            # the failing cell
    code, out, err = main(capsys, "history", "site", "--db",
                          f"sqlite:///{tmp_path / 'r' / 'history.sqlite'}", "-o", tmp_path / "s")
    assert code == 0 and err == "", err
    assert len(list((tmp_path / "s" / "families").glob("*.png"))) == 2
