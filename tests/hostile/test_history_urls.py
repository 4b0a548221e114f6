"""History URLs as hostile input: a port that is not a number is one line, exit 2, wherever the
URL comes from (DL_BENCH_HISTORY_URL, [history] url, --db); the database's password is masked
wherever a URL is shown (doctor, every error line), as `plan` masks it; a reading history
command never makes a database (a mistyped --db path stays absent); a foreign table named like
the runner's is "not the runner's", never SQL's wording; a DL_BENCH_HISTORY_URL that is no
database URL is refused before anything runs."""

from __future__ import annotations

import sqlite3

import pytest

from tests.hostile.test_hostile_runs import MATRIX, hostile_matrix, main, one_line

PASSWORD = "s3cret-pw"
BAD_PORT = f"postgresql://bench:{PASSWORD}@db.example:abc/bench"


def test_a_port_that_is_no_number_is_one_line_wherever_the_url_comes_from(
        tmp_path, capsys, monkeypatch):
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(1.0))
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", BAD_PORT)
    line = one_line(*main(capsys, "plan", matrix)[::2])
    assert line.startswith("error: DL_BENCH_HISTORY_URL='postgresql://bench:***@db.example:abc/"
                           "bench': expected an SQLAlchemy URL") and "its PORT a number" in line
    monkeypatch.delenv("DL_BENCH_HISTORY_URL")
    matrix.write_text(hostile_matrix(1.0, tables={"history": {"url": BAD_PORT}}))
    line = one_line(*main(capsys, "plan", matrix)[::2])
    assert "history.url: 'postgresql://bench:***@db.example:abc/bench': expected" in line, line
    for action in ("list", "import"):
        line = one_line(*main(capsys, "history", action, *(["."] if action == "import" else []),
                              "--db", BAD_PORT)[::2])
        assert line.startswith("error: history URL 'postgresql://bench:***@db.example:abc/bench'"
                               ": expected an SQLAlchemy URL"), line
        assert PASSWORD not in line


@pytest.mark.parametrize("url", [
    f"mysql://bench:{PASSWORD}@db.example/bench",               # another database
    f"postgresql://bench:{PASSWORD}@db.example:99999/bench",    # a port out of range
])
def test_no_error_line_shows_the_password(url, capsys, monkeypatch):
    line = one_line(*main(capsys, "history", "list", "--db", url)[::2])
    assert PASSWORD not in line and "bench:***@db.example" in line, line
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", url)
    line = one_line(*main(capsys, "doctor")[::2])
    assert PASSWORD not in line and "bench:***@db.example" in line, line


def test_doctor_shows_the_setting_without_its_password(capsys, monkeypatch):
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", f"postgresql://bench:{PASSWORD}@127.0.0.1:1/b")
    code, out, err = main(capsys, "doctor")
    assert PASSWORD not in out + err
    assert "setting: DL_BENCH_HISTORY_URL=postgresql://bench:***@127.0.0.1:1/b" in out, out


@pytest.mark.parametrize("action", [["list"], ["show", "x"], ["regressions"],
                                    ["diff", "a/1", "a/2"]])
def test_a_reading_history_command_never_makes_a_database(action, tmp_path, capsys):
    typo = tmp_path / "typo" / "history.sqlite"
    line = one_line(*main(capsys, "history", *action, "--db", f"sqlite:///{typo}")[::2])
    assert line == f"error: history database sqlite:///{typo}: no such file (a reading command " \
                   "never makes one; a run or `history import` does)"
    assert not (tmp_path / "typo").exists()


def test_a_foreign_table_named_runs_is_not_the_runners(tmp_path, capsys):
    database = tmp_path / "other.sqlite"
    connection = sqlite3.connect(database)
    connection.executescript("CREATE TABLE runs (x INTEGER);")
    connection.close()
    before = database.read_bytes()
    for action in (["list"], ["import", tmp_path]):          # a reader, and a writer
        line = one_line(*main(capsys, "history", *action, "--db", f"sqlite:///{database}")[::2])
        assert line == f"error: history database sqlite:///{database}: it holds tables that " \
                       "are not the runner's (runs); a history needs a database of its own"
    assert database.read_bytes() == before                          # nothing written into it


# --- DL_BENCH_HISTORY_URL is checked before anything runs ------------------------------------

@pytest.mark.parametrize("url", ["garbage", "mysql://u@h/db", "http://example.org/h.sqlite",
                                 "sqlite:relative.sqlite"])
def test_a_bad_history_url_setting_is_refused_before_anything_runs(url, tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", url)
    (tmp_path / "m.toml").write_text(MATRIX)
    for argv in (("doctor",), ("plan", tmp_path / "m.toml"),
                 (tmp_path / "m.toml", "--results-dir", tmp_path / "r")):
        line = one_line(*main(capsys, *argv)[::2])
        assert line == f"error: DL_BENCH_HISTORY_URL={url!r}: expected an SQLAlchemy URL, " \
                       "sqlite:///PATH or postgresql://USER@HOST[:PORT]/DATABASE"
    assert not (tmp_path / "r").exists()
