"""Where a run's history goes: the host's DL_BENCH_HISTORY_URL beats the matrix's `[history]
url` (a shared matrix cannot choose a host's database) and `plan` says which and why; a
resumed run records beside the run it resumes, unless its copy lies outside a results folder
(or two levels under one anybody may write), then in --results-dir's. The cells run in this
interpreter (NumPy's selftest)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from runner.paths import REPO_ROOT
from tests.hostile.helpers import history_runs
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import MATRIX, hostile_matrix, main
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


def test_the_hosts_history_url_beats_the_matrix_and_plan_names_it(tmp_path, capsys,
                                                                  monkeypatch):
    theirs, ours = tmp_path / "other-app.sqlite", tmp_path / "ours.sqlite"
    sqlite3.connect(theirs).close()
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(repeats=1, tables={"history": {"url": f"sqlite:///{theirs}"}}))
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", f"sqlite:///{ours}")
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    assert code == 0, err
    assert len(history_runs(ours)) == 1
    with sqlite3.connect(theirs) as connection:       # the other application's file: untouched
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == []
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("history database: "))
    assert first < next(i for i, line in enumerate(lines) if line.startswith("run folder:"))
    code, out, err = main(capsys, "plan", matrix)
    assert code == 0, err
    said = " ".join(out.split())
    assert f"history database: sqlite:///{ours} (DL_BENCH_HISTORY_URL; it beats the matrix's " \
           "[history] url)" in said
    monkeypatch.delenv("DL_BENCH_HISTORY_URL")
    code, out, err = main(capsys, "plan", matrix)
    assert f"history database: sqlite:///{theirs} (the matrix's [history] url)" in \
        " ".join(out.split())


def test_a_resume_records_history_beside_the_run_it_resumes(run_copy, tmp_path, capsys):
    """Resumed without --results-dir: history.sqlite of the run's own results folder, never
    the checkout's results/history.sqlite."""
    beside = run_copy.parent.parent / "history.sqlite"
    checkout = REPO_ROOT / "results" / "history.sqlite"
    before = history_runs(checkout)
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err
    assert history_runs(beside) == [f"hostile/{run_copy.name}"]
    assert history_runs(checkout) == before
    said = " ".join(out.split())
    assert f"history database: sqlite:///{beside} (beside the run folders)" in said  # first lines
    assert f"in sqlite:///{beside}" in said


@pytest.mark.parametrize("where", ["another-name", "open-to-all"])
def test_a_resumed_copy_records_no_history_outside_a_results_folder(where, finished_run,
                                                                    tmp_path, capsys):
    """A run folder copied where no results folder is (its parent is not named after the run,
    or two levels up is a folder anybody may write, as /tmp): --results-dir's history."""
    outside = tmp_path / "outside"
    outside.mkdir()
    if where == "open-to-all":
        outside.chmod(0o1777)
        target = outside / "hostile" / finished_run.name
    else:
        target = outside / "copies" / finished_run.name
    shutil.copytree(finished_run, target)
    (target / ".lock").unlink(missing_ok=True)
    (tmp_path / "m.toml").write_text(MATRIX)
    code, out, err = main(capsys, tmp_path / "m.toml", "--resume", target, "--results-dir",
                          tmp_path / "results")
    assert code == 0, out + err
    assert not list(outside.rglob("history.sqlite*")) and not list(tmp_path.glob("history*"))
    assert history_runs(tmp_path / "results" / "history.sqlite") == [f"hostile/{target.name}"]
