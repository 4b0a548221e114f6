"""Hostile input, round 4 (issue 43): a tampered lock, concurrent first runs, a pipe in a value,
records a workload can rewrite, and the smaller promises after them. Each test failed before its
fix. Bad input stays one line on stderr, exit 2, nothing written; nothing finished is lost. The
cells run in this interpreter (`python = sys.executable`, NumPy's selftest), so nothing is built;
the lock checks ask PyPI (skipped where it cannot be reached)."""

from __future__ import annotations

import html
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w
from markdown_it import MarkdownIt

from runner import cli
from runner.environments import locking
from runner.paths import IMAGES_DIR, REPO_ROOT
from runner.results.render import plots
from runner.run import pipeline
from tests.hostile.test_hostile_round3 import fake_interpreter
# MATRIX: 2 selftest cells × 2 repeats, run by this interpreter; and the same autouse check.
from tests.hostile.test_hostile_runs import (MATRIX, hostile_matrix,  # noqa: F401
                                             no_process_left_behind)

HOST_PYTHON = sys.executable


@pytest.fixture(autouse=True)
def no_host_history_url(monkeypatch):
    """Runs record their history beside their run folders (a host's DL_BENCH_HISTORY_URL
    would take them elsewhere)."""
    monkeypatch.delenv("DL_BENCH_HISTORY_URL", raising=False)


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err)
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def records(run_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")}


# --- 1. lock --check reads the whole lock -------------------------------------------------------

FAKE_HASH = "sha256:" + "0" * 62 + "aa"
NUMPY_HASH = re.compile(r"(?<=--hash=)sha256:[0-9a-f]{64}")


def tamper_numpy_lock(text: str, how: str) -> str:
    numpy_entry = text[text.index("numpy=="):text.index("# via", text.index("numpy=="))]
    if how == "one hash":
        tampered = NUMPY_HASH.sub(FAKE_HASH, numpy_entry, count=1)
    elif how == "every hash":
        tampered = NUMPY_HASH.sub(FAKE_HASH, numpy_entry)
    elif how == "a marker":
        tampered = numpy_entry.replace(
            " \\", " ; sys_platform == 'win32' \\", 1)
    else:                                   # a place for files that the .in does not name
        return "--find-links https://mirror.invalid/wheels\n" + text
    return text.replace(numpy_entry, tampered)


@pytest.mark.parametrize("how, said", [
    ("one hash", "numpy 2.4.6: 1 hash(es) not of a file the index serves for it, first "
                 "sha256:0000000000000000… (and 1 file(s) it serves are not pinned)"),
    ("every hash", "numpy 2.4.6: 1 hash(es) not of a file the index serves for it, first "
                   "sha256:0000000000000000… (and 72 file(s) it serves are not pinned)"),
    ("a marker", "numpy 2.4.6: pinned as 'numpy==2.4.6; sys_platform == \"win32\"', resolves "
                 "to 'numpy==2.4.6'"),
    ("find-links", "options ['--find-links https://mirror.invalid/wheels'] → none"),
])
def test_lock_check_compares_hashes_markers_and_indexes_with_a_fresh_resolution(
        how, said, pypi, tmp_path, monkeypatch, capsys):
    images = tmp_path / "images"
    shutil.copytree(IMAGES_DIR / "numpy", images / "numpy")
    lock = images / "numpy" / "requirements.lock"
    shipped = lock.read_text()
    assert "numpy==2.4.6 \\" in shipped                 # the shipped pin the messages name
    lock.write_text(tamper_numpy_lock(shipped, how))
    monkeypatch.setattr(locking, "IMAGES_DIR", images)
    code, out, err = main(capsys, "lock", "--check", "numpy")
    assert code == 1, out + err
    assert "images/numpy/requirements.lock differs from what requirements.in resolves to: " \
           f"{said} (" in " ".join(out.split())
    # Re-locked, the lock is what the index serves again: no hash of the tampered one survives.
    code, out, err = main(capsys, "lock", "numpy")
    assert code == 0 and lock.read_text() == shipped, out + err
    assert main(capsys, "lock", "--check", "numpy")[0] == 0


# --- 2. a history created by several runs at once --------------------------------------------

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real run: 2 selftest cells × 2 repeats, all ok (its history in its results folder)."""
    folder = tmp_path_factory.mktemp("finished")
    (folder / "matrix.toml").write_text(MATRIX)
    assert cli.main([str(folder / "matrix.toml"), "--results-dir", str(folder / "results")]) == 0
    (run,) = (folder / "results" / "hostile").iterdir()
    return run


def copy_run(finished_run: Path, into: Path, run_id: str | None = None) -> Path:
    """A copy of the run (another run, when `run_id` names it), with its matrix beside."""
    target = into / "results" / "hostile" / (run_id or finished_run.name)
    shutil.copytree(finished_run, target, symlinks=True)
    (target / ".lock").unlink(missing_ok=True)
    (into / "matrix.toml").write_text(MATRIX)
    if run_id:
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["run_id"] = f"hostile/{run_id}"
        (target / "manifest.json").write_text(json.dumps(manifest))
    return target


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    return copy_run(finished_run, tmp_path)


def history_runs(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return sorted(row[0] for row in connection.execute("SELECT run_id FROM runs"))


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


def test_three_imports_creating_one_history_at_once_record_every_run(finished_run, tmp_path):
    database, go = tmp_path / "history.sqlite", tmp_path / "go"
    runs = [copy_run(finished_run, tmp_path / f"copy{i}", f"20260101T00000{i}Z")
            for i in range(3)]
    imports = [subprocess.Popen([HOST_PYTHON, "-c", AT_ONCE, str(go), "history", "import",
                                 str(run), "--db", f"sqlite:///{database}"], cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for run in runs]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready-*"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()
    said = [p.communicate(timeout=120)[0] for p in imports]
    assert [p.returncode for p in imports] == [0, 0, 0], said
    assert history_runs(database) == [f"hostile/20260101T00000{i}Z" for i in range(3)]


# --- 5. a damaged history is bad input, not an internal error ---------------------------------

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


# --- 8. the history's URL and its database ------------------------------------------------------

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


# --- 5 and 6. a workload file that is too deep, or too big, to read ------------------------------

def user_workload_matrix(folder: Path, source: str) -> Path:
    (folder / "bench").mkdir(parents=True, exist_ok=True)
    (folder / "bench" / "deep.py").write_text(source)
    matrix = folder / "m.toml"
    matrix.write_text(f'[environments.host]\npython = "{HOST_PYTHON}"\napi = "numpy"\n\n'
                      '[workloads.deep]\nfile = "bench/deep.py"\ntasks = ["run"]\n\n'
                      '[[benchmarks]]\nworkload = "deep"\nenvironments = ["host"]\n')
    return matrix


@pytest.mark.parametrize("source, said", [
    ("X = " + "-" * 20_000 + "1\ndef numpy_run(spec):\n    return lambda: 1\n",
     "workloads.deep.file: deep.py: Python nested too deeply for the parser (expressions "
     "inside each other)"),
    ("def numpy_run(spec, extra, a=1" + "+1" * 500 + "):\n    return lambda: 1\n",
     "workloads.deep.file: bench/deep.py line 1: numpy_run is called as numpy_run(spec), but "
     "it is def numpy_run(… (a default nested too deeply to show))"),
], ids=["20000-unary-minus", "500-operators-in-a-signature"])
def test_python_nested_too_deeply_is_one_line_naming_the_python_file(source, said, tmp_path,
                                                                    capsys):
    matrix = user_workload_matrix(tmp_path, source)
    for argv in (("plan", matrix), (matrix, "--results-dir", tmp_path / "r")):
        line = one_line(*main(capsys, *argv)[::2])
        assert line == f"error: {matrix}: {said}"
    assert not (tmp_path / "r").exists()


def at_most_1_gb_of_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_2_gb_file_beside_a_workload_is_refused_unread(tmp_path):
    matrix = user_workload_matrix(tmp_path, "def numpy_run(spec):\n    return lambda: 1\n")
    with (tmp_path / "bench" / "huge.py").open("wb") as sparse:     # 2 GB, no disk used
        sparse.truncate(2 << 30)

    def plan() -> subprocess.CompletedProcess:
        # The runner may not hold even half of it: reading it whole is a MemoryError here.
        return subprocess.run([HOST_PYTHON, "-m", "runner", "plan", str(matrix)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120,
                              preexec_fn=at_most_1_gb_of_memory)

    done = plan()               # beside it and not imported: no part of its code, never read
    assert done.returncode == 0, done.stderr
    (tmp_path / "bench" / "deep.py").write_text(
        "import huge\n\ndef numpy_run(spec):\n    return lambda: 1\n")
    done = plan()
    assert done.returncode == 2 and done.stderr.strip() == \
        f"error: {matrix}: workloads.deep.file: the workload's code (its file and the modules " \
        f"of {tmp_path / 'bench'} it imports) holds more than 16 MB", done.stderr


# --- 4. a long option value ---------------------------------------------------------------------

def test_a_long_option_value_is_printed_shortened_and_kept_whole(tmp_path, capsys):
    value = "x" * 20_000 + "-end"             # 20 kB: 9 s of printing before, minutes at 200 kB
    (tmp_path / "m.toml").write_text(hostile_matrix(1.0, repeats=1, options={"marker": value}))
    started = time.monotonic()
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 0, err
    assert time.monotonic() - started < 60
    left_out = re.findall(r"… \((\d+) more characters not shown\)", out.replace("\n", ""))
    assert "-end" not in out and len(left_out) >= 2 and min(map(int, left_out)) > 19_000, out
    assert max(map(len, out.splitlines())) <= 500
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert [r["options"]["marker"] for r in records(run).values()] == [value]
    assert value in (run / "report.md").read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    assert value in json.dumps(manifest)


# --- 3. a user's string in report.md, report.html and compare's Markdown ----------------------

HOSTILE_VALUE = "a|b <img src=x onerror=alert(1)> [x](javascript:alert(1)) `c` *d* &#106;"
FAILING_WORKER = """
import json, sys
json.dump({"schema": 1, "status": "failed", "error": "boom | <img src=y onerror=alert(2)> "
           "[y](javascript:alert(2)) in " + sys.argv[2]}, open(sys.argv[2], "w"))
"""


def tables_and_text(page: str) -> tuple[list[list[int]], str]:
    """Per HTML table, the cell count of each row (its head first); and the page's text."""
    counts = [[len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table,
                                                                         re.S)]
              for table in re.findall(r"<table>.*?</table>", page, re.S)]
    return counts, html.unescape(re.sub(r"<[^>]+>", "", page))


def assert_inert(page: str, *texts: str) -> None:
    """No tag or link made of a user's string, every row of every table as wide as its head,
    and each string shown as the characters it is."""
    assert "<img src=x" not in page and "<img src=y" not in page
    assert "javascript:" not in "".join(re.findall(r"href=\"[^\"]*\"", page))
    counts, text = tables_and_text(page)
    assert counts and all(len(set(rows)) == 1 for rows in counts), counts
    for expected in texts:
        assert expected in text, expected


def test_a_users_strings_are_escaped_in_every_markdown_context(tmp_path, capsys):
    liar = fake_interpreter(tmp_path, FAILING_WORKER)
    results = tmp_path / "r <img src=x onerror=alert(3)>"
    (tmp_path / "m.toml").write_text(tomli_w.dumps({
        "run": {"name": "hostile", "repeats": 1, "warmup_steps": 1, "steps": 3,
                "profile": "full"},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"},
                         "liar": {"python": str(liar), "api": "numpy"}},
        "benchmarks": [{"workload": "selftest", "environments": ["host", "liar"],
                        "options": {"behaviour": "ok", "sleep_ms": 1.0,
                                    "marker": HOSTILE_VALUE}}]}))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", results)
    assert code == 1, out + err                                  # the liar's cell failed
    (run,) = (results / "hostile").iterdir()
    error = f"boom | <img src=y onerror=alert(2)> [y](javascript:alert(2)) in {run}"
    markdown = (run / "report.md").read_text()
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    assert_inert(rendered, f"marker={HOSTILE_VALUE}]", error)
    assert_inert((run / "report.html").read_text(), f"marker={HOSTILE_VALUE}]", error)
    code, out, err = main(capsys, "compare", run, run, "--markdown", tmp_path / "c.md")
    compared = MarkdownIt("commonmark", {"html": True}).enable("table").render(
        (tmp_path / "c.md").read_text())
    assert_inert(compared, f"marker={HOSTILE_VALUE}]")


# --- 7. records a workload rewrites -------------------------------------------------------------

REWRITER = '''
import json, pathlib, time

DONE = []


def numpy_run(spec):
    """Each step sleeps 1 ms; the first step of each process, while the trigger file exists,
    halves the step times of every record the run has finished and empties its ledger."""
    trigger = pathlib.Path(spec.options["trigger"])
    spec.options["n"]

    def step():
        if trigger.exists() and not DONE:
            DONE.append(True)
            run = next(p for p in pathlib.Path(__file__).resolve().parents
                       if (p / "manifest.json").is_file())
            for path in (run / "cells").glob("*.json"):
                record = json.loads(path.read_text())
                record["samples_ms"] = [s / 2 for s in record["samples_ms"]]
                path.write_text(json.dumps(record))
            (run / "ledger.jsonl").write_text("")
        time.sleep(0.001)
        return 1.0
    return step
'''


def test_records_a_workload_rewrites_are_named_and_left_out_everywhere(tmp_path, capsys):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "rewriter.py").write_text(REWRITER)
    trigger = tmp_path / "trigger"
    trigger.touch()
    matrix = tmp_path / "m.toml"
    matrix.write_text(tomli_w.dumps({
        "run": {"name": "hostile", "repeats": 2, "warmup_steps": 1, "steps": 3,
                "profile": "full"},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"}},
        "workloads": {"rewriter": {"file": "bench/rewriter.py", "tasks": ["run"],
                                   "options": {"trigger": str(trigger), "n": 1}}},
        "benchmarks": [{"workload": "rewriter", "environments": ["host"],
                        "options": {"n": [1, 2]}}]}))
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    files = sorted((run / "cells").glob("*.json"))
    last = max(files, key=lambda p: p.stat().st_mtime_ns)   # no worker ran after its own
    changed = [p for p in files if p != last]
    assert len(files) == 4 and code == 0, out + err
    why = "changed since the runner wrote it (its sha256 is not the one ledger.jsonl holds)"
    assert f"warning: {run / 'ledger.jsonl'}: changed while the run ran; written again from " \
           "the runner's own copy" in err
    for path in changed:                 # the run's own reports: its copy of the ledger held
        assert f"warning: {path}: {why}; not in the reports" in err
    report = (run / "report.md").read_text()
    assert "## Records left out" in report and all(f"`cells/{p.name}`: {why}" in report
                                                   for p in changed)
    code, out, err = main(capsys, "report", run)
    assert code == 0 and all(f"warning: {p}: {why}; not in the reports" in err for p in changed)
    code, out, err = main(capsys, "compare", run, run, "--markdown", tmp_path / "c.md")
    assert all(f"warning: {p}: {why}; not compared" in err for p in changed), err
    code, out, err = main(capsys, "history", "import", run, "--db",
                          f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert code == 0 and all(f"warning: {p}: {why}; not recorded" in err for p in changed)
    with sqlite3.connect(tmp_path / "h.sqlite") as connection:
        assert connection.execute("SELECT count(*) FROM repeats").fetchone()[0] == 1
    trigger.unlink()
    code, out, err = main(capsys, matrix, "--resume", run)
    assert code == 0, out + err
    said = " ".join(out.split())
    assert all(f"set aside {p.name} ({why}) to {run / 'set-aside'}: its cell runs again" in said
               for p in changed)
    assert len(records(run)) == 4 and len(list((run / "set-aside").iterdir())) == 3
    code, out, err = main(capsys, "report", run)
    assert code == 0 and err == "", err


def test_a_run_without_a_ledger_is_read_unverified_and_said_so(run_copy, tmp_path, capsys):
    (run_copy / "ledger.jsonl").unlink()          # a run made before the ledger (and before
    manifest = json.loads((run_copy / "manifest.json").read_text())     # its manifest said so)
    del manifest["ledger"]
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    missing = f"warning: {run_copy / 'ledger.jsonl'}: missing (a run made before the ledger); " \
              "the run's records are read unverified"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err.strip() == missing
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, out + err
    assert "ledger.jsonl: the run had none; its 4 record(s) are taken as they are now" in \
        " ".join(out.split())
    assert len(records(run_copy)) == 4 and not (run_copy / "set-aside").exists()
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err == ""


# --- 8. the smaller promises --------------------------------------------------------------------

def test_a_signal_after_the_last_cell_says_the_history_is_not_recorded_and_how_to(
        tmp_path, capsys, monkeypatch):
    real_cells = pipeline.run_cells
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def cells_then_ctrl_c(*args, **kwargs):
        real_cells(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)                               # interrupted here, every cell finished

    monkeypatch.setattr(pipeline, "run_cells", cells_then_ctrl_c)
    (tmp_path / "m.toml").write_text(MATRIX)
    try:
        code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    database = tmp_path / "r" / "history.sqlite"
    said = " ".join(out.split())
    command = f" -m runner history import {run} --db sqlite:///{database}"
    assert "! history: not recorded (the run was interrupted); its --resume records it, or " \
           "record the run as it is: " in said and command in said
    assert not database.exists()
    assert main(capsys, *command.split()[2:])[0] == 0           # the command it gave
    assert history_runs(database) == [f"hostile/{run.name}"]


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


SMALL_DISK = """
set -e
mount -t tmpfs -o size=3m tmpfs "$1"
"$2" -m runner "$3" --results-dir "$1/results" >"$1/../out.txt" 2>"$1/../err.txt" \\
    || echo "exit $?" >"$1/../code.txt"
find "$1" -mindepth 1 >"$1/../left.txt"
"""


def test_a_results_folder_too_small_for_the_reserve_is_left_as_it_was(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    (tmp_path / "m.toml").write_text(MATRIX)
    (tmp_path / "disk").mkdir()
    (tmp_path / "small.sh").write_text(SMALL_DISK)
    done = subprocess.run(["unshare", "--mount", "--map-root-user", "sh",
                           str(tmp_path / "small.sh"), str(tmp_path / "disk"), HOST_PYTHON,
                           str(tmp_path / "m.toml")], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no tmpfs in a mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "code.txt").read_text().strip() == "exit 2"
    err = (tmp_path / "err.txt").read_text().strip().splitlines()
    assert len(err) == 1 and "cannot set 8 MB aside for the run's own files" in err[0], err
    assert (tmp_path / "left.txt").read_text() == ""          # no run-folder skeleton


HOG = '''
import time
import numpy as np


def numpy_run(spec):
    held = np.ones(spec.options["mb"] << 17)         # float64: mb MB, all of it touched

    def step():
        time.sleep(0.2)
        return held[-1]
    return step
'''


def test_a_local_cell_above_the_memory_limit_is_killed_and_recorded_oom(tmp_path, capsys,
                                                                       monkeypatch):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "hog.py").write_text(HOG)
    (tmp_path / "m.toml").write_text(tomli_w.dumps({
        "run": {"name": "hostile", "repeats": 1, "warmup_steps": 1, "steps": 5,
                "profile": "full", "executor": "local"},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"}},
        "workloads": {"hog": {"file": "bench/hog.py", "tasks": ["run"],
                              "options": {"mb": 400}}},
        "benchmarks": [{"workload": "hog", "environments": ["host"]}]}))
    monkeypatch.setenv("DL_BENCH_LOCAL_MEMORY", "200m")
    started = time.monotonic()
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1, out + err
    assert time.monotonic() - started < 60                  # killed, not timed out
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    (record,) = records(run).values()
    assert record["status"] == "oom"
    assert "above the limit of 200 MB (DL_BENCH_LOCAL_MEMORY): killed]" in record["error"]


def test_an_interrupted_report_keeps_the_plots_it_had(run_copy, capsys, monkeypatch):
    before = {p.name: p.read_bytes() for p in (run_copy / "plots").glob("*.png")}
    assert {"time.png", "memory.png"} <= set(before)

    def ctrl_c(summaries, target):                  # Ctrl-C while the memory plot is drawn
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "PLOTS", [(name, title, ctrl_c if name == "memory.png" else draw)
                                         for name, title, draw in plots.PLOTS])
    code, out, err = main(capsys, "report", run_copy)
    assert code == 130, err
    assert {p.name: p.read_bytes() for p in (run_copy / "plots").glob("*.png")} == before
    assert not list(run_copy.glob(".plots-*"))        # the half-drawn folder is gone


@pytest.mark.parametrize("preset", ["kaggle://keras/bert/keras/bert_tiny_en_uncased/2",
                                    "hf://google-bert/bert-base-uncased"])
def test_a_hub_handle_as_a_preset_is_refused_when_the_matrix_is_read(preset, tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(tomli_w.dumps({
        "environments": {"kj": {"image": "jax", "api": "keras", "backend": "jax"}},
        "benchmarks": [{"workload": "bert", "task": "predict", "batch_size": 2,
                        "environments": ["kj"], "options": {"preset": preset}}]}))
    for argv in (("plan", matrix), (matrix, "--results-dir", tmp_path / "r")):
        line = one_line(*main(capsys, *argv)[::2])
        assert line == f"error: {matrix}: benchmarks[0]: options.preset: {preset!r} is a hub " \
                       "handle, not a local folder; nothing is downloaded: download the preset " \
                       "yourself and give its folder"
    assert not (tmp_path / "r").exists()


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
