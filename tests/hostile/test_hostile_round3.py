"""Hostile input, round 3 (issue 32): nine ways a run folder, a terminal or a database could
still be turned against the user, and the lower ones after them. Each test failed before its
fix. Bad input stays one line on stderr, exit 2, nothing written; nothing finished is lost.
The cells run in this interpreter (`python = sys.executable`, NumPy's selftest), so nothing is
built; property-based tests (hypothesis) draw the hostile numbers and strings."""

from __future__ import annotations

import calendar
import contextlib
import io
import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from runner import cli
from runner.paths import REPO_ROOT
from runner.run import pipeline
# MATRIX: 2 selftest cells × 2 repeats, run by this interpreter; and the same autouse check.
from tests.hostile.test_hostile_runs import (MATRIX, hostile_matrix,  # noqa: F401
                                             no_process_left_behind)
from tests.matrices import this_interpreter

HOST_PYTHON = sys.executable

FUZZ = settings(max_examples=int(os.environ.get("HOSTILE_FUZZ_EXAMPLES", "25")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


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


def fake_interpreter(folder: Path, worker: str, name: str = "liar") -> Path:
    """An interpreter that runs `worker` (a script) in place of the runner's worker, and is the
    host's Python for anything else (the probe)."""
    script = folder / f"{name}_worker.py"
    script.write_text(textwrap.dedent(worker))
    interpreter = folder / name
    interpreter.write_text(f'#!/bin/sh\nif [ "$2" = "runner.worker" ]; then exec {HOST_PYTHON} '
                           f'{script} "$3" "$4"; fi\nexec {HOST_PYTHON} "$@"\n')
    interpreter.chmod(0o755)
    return interpreter


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A real run: 2 selftest cells × 2 repeats, all ok (its history in its results folder)."""
    folder = tmp_path_factory.mktemp("finished")
    (folder / "matrix.toml").write_text(MATRIX)
    assert cli.main([str(folder / "matrix.toml"), "--results-dir", str(folder / "results")]) == 0
    (run,) = (folder / "results" / "hostile").iterdir()
    return run


def copy_run(finished_run: Path, into: Path) -> Path:
    target = into / "results" / "hostile" / finished_run.name
    shutil.copytree(finished_run, target, symlinks=True)
    (target / ".lock").unlink(missing_ok=True)
    (into / "matrix.toml").write_text(MATRIX)
    return target


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    return copy_run(finished_run, tmp_path)


def tamper(run_dir: Path, change) -> list[Path]:
    """Apply change(record) to the records of one cell (both repeats); the files changed."""
    first_cell = sorted((run_dir / "cells").glob("*.json"))[0].stem.rsplit("-r", 1)[0]
    changed = sorted((run_dir / "cells").glob(f"{first_cell}-r*.json"))
    for path in changed:
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    return changed


# --- 1. finite but huge numbers ------------------------------------------------------------------

def test_huge_finite_samples_are_set_aside_by_report_compare_resume_and_history(
        run_copy, finished_run, tmp_path, capsys):
    huge = tamper(run_copy, lambda r: r.update(samples_ms=[1.7e308, 1.7e308, 1.7e308]))
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0, err
    for path in huge:
        assert f"warning: {path}: samples_ms[0]: must be <= 604800000.0, got 1.7e+308; not in " \
               "the reports" in err
    assert (run_copy / "report.md").is_file()
    code, out, err = main(capsys, "compare", finished_run, run_copy, "--markdown",
                          tmp_path / "c.md")
    assert code in (0, 1) and "internal error" not in err and (tmp_path / "c.md").is_file()
    code, out, err = main(capsys, "history", "import", run_copy, "--db",
                          f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert code == 0, err
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err
    for path in huge:
        assert f"set aside {path.name} (samples_ms[0]: must be <= 604800000.0" in \
            " ".join(out.split())
    assert all(r["status"] == "ok" and max(r["samples_ms"]) < 1e3
               for r in records(run_copy).values())


HUGE_WORKER = """
import json, sys
spec = json.load(open(sys.argv[1]))
json.dump({"schema": 1, "status": "ok", "samples_ms": [1.7e308] * 3, "flops_per_step": 1e308},
          open(sys.argv[2], "w"))
"""


def test_a_worker_giving_huge_step_times_is_a_crashed_cell_not_an_internal_error(tmp_path,
                                                                                  capsys):
    liar = fake_interpreter(tmp_path, HUGE_WORKER)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(liar), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1 and "internal error" not in err, out + err      # failed cells, reports
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert all(r["status"] == "crashed" and "samples_ms[0]: must be <= 604800000.0" in r["error"]
               for r in records(run).values())
    assert (run / "report.md").is_file()


# Every number the statistics read: the record's figures, the samples and warm-up times, the
# counts that scale them, the outliers' indices and extra's windows.
NUMBER_FIELDS = ["samples_ms", "warmup_s", "steps_per_call", "calls_per_sample", "outliers",
                 "extra.telemetry_window_s", "extra.epoch_s", "import_s", "setup_s",
                 "compile_s", "train_s", "wall_s", "items_per_step", "rss_initial_mb",
                 "rss_peak_mb", "vram_peak_mb", "nvml_memory_peak_mb", "gpu_power_mean_w",
                 "gpu_energy_j", "cpu_util_mean", "flops_per_step", "loss_first", "loss_last",
                 "accuracy"]
HOSTILE_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7e308, -1.7e308, 5e-324, 1e-300, 0.0, -0.0, 1e30, 1e31]),
    st.integers(min_value=-10**400, max_value=10**400))


def set_field(record: dict, field: str, value) -> None:
    if field.startswith("extra."):
        record["extra"] = {**(record.get("extra") or {}), field[6:]: value}
    elif field in ("samples_ms", "warmup_s"):
        record[field] = [value] * 3
    elif field == "outliers":
        record[field] = [[value, value]]
    else:
        record[field] = value
    if field == "gpu_energy_j" or field == "extra.telemetry_window_s":
        record["train_s"] = 2.0           # an energy window the reports compute with


@settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 2))     # a `report` per example
@given(field=st.sampled_from(NUMBER_FIELDS), value=HOSTILE_NUMBERS)
def test_any_number_in_a_record_is_reported_or_set_aside(finished_run, capsys, field, value):
    """Whatever finite (or huge whole) number a field holds, `report` ends 0 with its tables:
    the record is in them, or set aside with one warning line naming it."""
    with tempfile.TemporaryDirectory() as scratch:
        run = copy_run(finished_run, Path(scratch))
        changed = tamper(run, lambda r: set_field(r, field, value))
        (run / "report.md").unlink()
        code, out, err = main(capsys, "report", run)
        assert code == 0, err
        assert all(line.startswith("warning: ") for line in err.strip().splitlines()), err
        assert "internal error" not in err and "Traceback" not in err
        assert (run / "report.md").is_file()
        named = [p for p in changed if str(p) in err]
        assert named in ([], changed), err


# --- 2. escape sequences ----------------------------------------------------------------------

@pytest.mark.parametrize("table, fragment", [
    ({"env": {"ZZ": "\x1b[2K\rPATH=/evil"}}, "env: ZZ: '\\x1b[2K\\rPATH=/evil' holds a control"),
    ({"env": {"ZZ": "a\tb"}}, "env: ZZ: 'a\\tb' holds a control character"),
    ({"python": HOST_PYTHON + "\x1b[2K"}, "environments.host.python: "),
], ids=["env-escape", "env-tab", "python"])
def test_control_characters_in_environment_values_are_refused(table, fragment, tmp_path,
                                                              capsys):
    matrix = tmp_path / "m.toml"
    env = {"python": HOST_PYTHON, "api": "numpy", **table}
    matrix.write_text(tomli_w.dumps({"environments": {"host": env}, "benchmarks": [
        {"workload": "selftest", "environments": ["host"]}]}))
    for argv in (("plan", matrix), (matrix, "--results-dir", tmp_path / "r")):
        line = one_line(*main(capsys, *argv)[::2])
        assert fragment in line and "\x1b" not in line
    assert not (tmp_path / "r").exists()


def test_control_characters_in_the_history_url_and_a_baseline_option_are_refused(tmp_path,
                                                                                   capsys):
    for extra, fragment in (({"history": {"url": "sqlite:////tmp/x\x1b[2K.sqlite"}},
                             "history.url: 'sqlite:////tmp/x\\x1b[2K.sqlite' holds a control"),
                            ({"report": {"baselines": {"options": {"behaviour": "o\x1bk"}}}},
                             "report.baselines.options.behaviour: 'o\\x1bk' holds a control")):
        matrix = tmp_path / "m.toml"
        matrix.write_text(tomli_w.dumps({**tomllib.loads(MATRIX), **extra}))
        assert fragment in one_line(*main(capsys, "plan", matrix)[::2])


@FUZZ
@given(value=st.text(min_size=1, max_size=8).flatmap(
    lambda text: st.sampled_from([text, text + "\x1b[2K", "\r" + text])),
    key=st.sampled_from(["ZZ", "XLA_FLAGS"]))
def test_whatever_an_env_value_holds_the_plan_prints_no_control_character(value, key):
    """An env value is refused (one line) or shown; either way nothing reaches the terminal
    but printable text and line ends."""
    with tempfile.TemporaryDirectory() as scratch:
        matrix = Path(scratch) / "m.toml"
        matrix.write_text(tomli_w.dumps({
            "environments": {"host": {"python": HOST_PYTHON, "api": "numpy",
                                      "env": {key: value}}},
            "benchmarks": [{"workload": "selftest", "environments": ["host"]}]}))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["plan", str(matrix)])
        assert code in (0, 2), err.getvalue()
        shown = out.getvalue() + err.getvalue()
        assert all(c.isprintable() or c == "\n" for c in shown), repr(shown)
        if code == 0:                                 # shown: only printable values pass
            assert value.isprintable() and "env host: " in shown


def test_a_matrix_path_and_a_set_aside_name_are_printed_escaped(run_copy, tmp_path, capsys):
    odd = tmp_path / "odd\x1b[2K"
    odd.mkdir()
    matrix = odd / "m.toml"
    matrix.write_text(MATRIX)
    code, out, err = main(capsys, "plan", matrix)
    assert code == 0, err
    assert "\x1b" not in out and "odd\\x1b[2K" in out
    bad = run_copy / "cells" / "x\x1b[2K\x07.json"
    bad.write_text("{")
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "set aside x\\x1b[2K\\x07.json (not valid JSON" in " ".join(out.split())


# --- 3. code a shell wrapper would load ---------------------------------------------------

def shell_wrapper(folder: Path) -> Path:
    wrapper = folder / "python-wrapper"
    wrapper.write_text(f'#!/bin/bash\nexec {HOST_PYTHON} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_bash_env_cannot_make_a_shell_wrapper_run_code(tmp_path, capsys):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"touch {marker}\n")
    matrix = tmp_path / "m.toml"
    wrapper = str(shell_wrapper(tmp_path))
    matrix.write_text(hostile_matrix(environments={"host": this_interpreter(
        python=wrapper, env={"BASH_ENV": str(evil)})}))
    line = one_line(*main(capsys, matrix, "--results-dir", tmp_path / "r")[::2])
    assert "env.BASH_ENV: makes a shell wrapper" in line and "unsafe_env = true" in line
    assert not marker.exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("name, value", [
    ("ENV", "/tmp/x.sh"), ("BASH_FUNC_python", "() { :; }"), ("SHELLOPTS", "xtrace"),
    ("PS4", "$(touch /tmp/x)"), ("GCONV_PATH", "/tmp"), ("GLIBC_TUNABLES", "glibc.x=1"),
    ("LOCPATH", "/tmp"), ("PERL5OPT", "-Mx"), ("ANY", "() { :; }; touch /tmp/x")])
def test_every_variable_that_makes_a_shell_or_libc_load_code_needs_unsafe_env(name, value,
                                                                               tmp_path,
                                                                               capsys):
    env = {"python": HOST_PYTHON, "api": "numpy", "env": {name: value}}
    matrix = tmp_path / "m.toml"
    matrix.write_text(tomli_w.dumps({"environments": {"host": env}, "benchmarks": [
        {"workload": "selftest", "environments": ["host"]}]}))
    line = one_line(*main(capsys, "plan", matrix)[::2])
    assert f"env.{name}: makes a shell wrapper" in line
    matrix.write_text(tomli_w.dumps({"environments": {"host": {**env, "unsafe_env": True}},
                                     "benchmarks": [{"workload": "selftest",
                                                     "environments": ["host"]}]}))
    code, out, err = main(capsys, "plan", matrix)          # the stated opt-in
    assert code == 0 and "(unsafe_env = true)" in out, err


PROBE_DUMP = """#!/bin/sh
if [ "$1" = "-c" ]; then env > "{dump}"; fi
exec {python} "$@"
"""


def test_the_interpreter_probe_gets_the_workers_allow_list_not_the_host_environment(
        tmp_path, capsys, monkeypatch):
    dump = tmp_path / "probe-env.txt"
    wrapper = tmp_path / "python"
    wrapper.write_text(PROBE_DUMP.format(dump=dump, python=HOST_PYTHON))
    wrapper.chmod(0o755)
    monkeypatch.setenv("DL_BENCH_TEST_HOST_SECRET", "do-not-pass")
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(python=str(wrapper), repeats=1))
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    assert code == 0, out + err
    probed = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert "DL_BENCH_TEST_HOST_SECRET" not in probed
    assert probed["PATH"] == os.environ["PATH"] and probed["PYTHONNOUSERSITE"] == "1"
    dump.unlink()
    code, out, err = main(capsys, "doctor", matrix, "--executor", "local")
    assert "DL_BENCH_TEST_HOST_SECRET" not in dump.read_text()


# --- 4 and 5. where the history goes ----------------------------------------------------------

def runs_in(database: Path) -> list[str]:
    if not database.exists():
        return []
    with sqlite3.connect(database) as connection:
        return [row[0] for row in connection.execute("SELECT run_id FROM runs")]


def test_the_hosts_history_url_beats_the_matrix_and_plan_names_it(tmp_path, capsys,
                                                                  monkeypatch):
    theirs, ours = tmp_path / "other-app.sqlite", tmp_path / "ours.sqlite"
    sqlite3.connect(theirs).close()
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(repeats=1, tables={"history": {"url": f"sqlite:///{theirs}"}}))
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", f"sqlite:///{ours}")
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    assert code == 0, err
    assert len(runs_in(ours)) == 1
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
    before = runs_in(checkout)
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err
    assert runs_in(beside) == [f"hostile/{run_copy.name}"]
    assert runs_in(checkout) == before
    said = " ".join(out.split())
    assert f"history database: sqlite:///{beside} (beside the run folders)" in said  # first lines
    assert f"in sqlite:///{beside}" in said


# --- 6. the resume line after Ctrl-C or SIGTERM --------------------------------------------------

SMOKE = hostile_matrix([300.0, 301.0, 302.0], repeats=1,
                       tables={"profiles": {"smoke": {"steps": 2}}})


@pytest.mark.slow          # a real runner stopped by SIGTERM, then resumed as printed: ~15 s
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_line_after_an_interruption_resumes_with_the_same_options(sig, tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(SMOKE)
    argv = [HOST_PYTHON, "-m", "runner", str(matrix), "--results-dir", str(tmp_path / "r"),
            "--profile", "smoke", "--only", "sleep_ms=30"]
    # A shell's background job (CI's, a nohup'd suite) ignores SIGINT and its children inherit
    # that; the runner, like Python, keeps a signal it was started ignoring: give it Ctrl-C.
    runner = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert runner.stdout is not None
    for line in runner.stdout:
        if line.startswith("✓ selftest"):           # one cell is finished, the next runs
            runner.send_signal(sig)
            break
    output = line + runner.communicate(timeout=120)[0]
    assert runner.returncode == 128 + sig, output
    (said,) = [line for line in output.splitlines() if "continue with: " in line]
    command = shlex.split(said.split("continue with: ", 1)[1])
    assert command[0] in (os.path.relpath(HOST_PYTHON, REPO_ROOT), HOST_PYTHON)
    assert command[command.index("--profile") + 1] == "smoke"
    assert command[command.index("--only") + 1] == "sleep_ms=30"
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert len(records(run)) == 3 and all(r["status"] == "ok" for r in records(run).values())


# --- 7. a relative interpreter --------------------------------------------------------------

def test_a_relative_python_is_the_matrix_folders_resolved_once_and_kept_absolute(
        tmp_path, capsys, monkeypatch):
    here = tmp_path / "project"
    (here / "bin").mkdir(parents=True)
    (here / "bin" / "py").symlink_to(HOST_PYTHON)
    (here / "m.toml").write_text(hostile_matrix(python="bin/py"))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bin").mkdir(parents=True)
    other = elsewhere / "bin" / "py"                  # another interpreter, same relative path
    other.write_text(f'#!/bin/sh\nexec {HOST_PYTHON} "$@"\n')
    other.chmod(0o755)
    monkeypatch.chdir(elsewhere)                      # the working folder is not the matrix's
    code, out, err = main(capsys, here / "m.toml", "--results-dir", tmp_path / "r",
                          "--only", "sleep_ms=1.0")
    assert code == 0, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    absolute = str(here / "bin" / "py")
    assert tomllib.loads((run / "matrix.toml").read_text())["environments"]["host"]["python"] \
        == absolute
    assert all(r["metadata"].get("env_source") in (None, "existing") for r in
               records(run).values())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["environments"]["host"]["python"] == absolute
    (elsewhere / "m.toml").write_text(hostile_matrix(python="bin/py"))   # a copy, here
    before = sorted(os.listdir(run / "cells"))
    line = one_line(*main(capsys, elsewhere / "m.toml", "--resume", run)[::2])
    assert "is not the matrix this run was started with (environments.host.python: " in line
    assert sorted(os.listdir(run / "cells")) == before
    code, out, err = main(capsys, here / "m.toml", "--resume", run)    # from anywhere: the same
    assert code == 0, err and len(records(run)) == 4


# --- 8. an image is one folder name ------------------------------------------------------------

@pytest.mark.parametrize("image", ["../images/numpy", "numpy/../numpy", "./numpy", ".."])
def test_an_image_is_one_folder_name_under_images(image, tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(f'[environments.x]\nimage = "{image}"\napi = "numpy"\n\n[[benchmarks]]\n'
                      'workload = "selftest"\n')
    for argv in (("plan", matrix), ("build", matrix, "--results-dir", tmp_path / "r"),
                 (matrix, "--results-dir", tmp_path / "r")):
        line = one_line(*main(capsys, *argv)[::2])
        assert "environments.x.image: " in line and "one folder name under images/" in line
    assert not (tmp_path / "r").exists()


# --- 9. the manifest is built once per run ------------------------------------------------------

def test_a_resume_keeps_the_runs_start_and_updates_its_manifest(run_copy, tmp_path, capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["started_at"] = "2001-02-03T04:05:06Z"     # the run's start, long ago
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    more = tmp_path / "more.toml"
    more.write_text(hostile_matrix(repeats=3))
    code, out, err = main(capsys, more, "--resume", run_copy, "--only", "sleep_ms=1.0")
    assert code == 0, err
    after = json.loads((run_copy / "manifest.json").read_text())
    assert after["started_at"] == "2001-02-03T04:05:06Z"
    assert after["host"] == manifest["host"] and after["run_id"] == manifest["run_id"]
    # The cell --only left out stays listed (and in the reports); the other has 3 repeats now.
    assert [(c["id"], c["repeats"]) for c in after["cells"]] == \
        [(c["id"], r) for c, r in zip(manifest["cells"], (3, 2), strict=True)]
    assert "sleep_ms=2.0" in (run_copy / "report.md").read_text()
    assert len(records(run_copy)) == 5
    assert len(after["resumed"]) == 1 and after["resumed"][0]["executor"] == "local"
    assert after["finished_at"] >= after["resumed"][0]["at"] and after["interrupted"] is False
    assert after["environments"]["host"]["env_source"] == "existing"   # prepared, updated
    code, out, err = main(capsys, "history", "list", "--db",
                          f"sqlite:///{run_copy.parent.parent / 'history.sqlite'}")
    assert "2001-02-03" in out


def test_a_new_runs_manifest_is_not_rebuilt_after_preparing(tmp_path, capsys, monkeypatch):
    """Its started_at is when the run folder was made, not when the environments were ready."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then sleep 4; fi\nexec {HOST_PYTHON} "$@"\n')
    slow.chmod(0o755)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(slow), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 0, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    started = json.loads((run / "manifest.json").read_text())["started_at"]
    made = calendar.timegm(time.strptime(run.name[:16], "%Y%m%dT%H%M%SZ"))
    started_s = calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ"))
    assert made <= started_s <= made + 2, (started, run.name)     # not 4 s later


# --- also, lower --------------------------------------------------------------------------------

def test_a_record_of_a_cell_the_manifest_does_not_list_is_named_and_left_out(run_copy, tmp_path,
                                                                             capsys):
    source = sorted((run_copy / "cells").glob("*.json"))[0]
    record = json.loads(source.read_text())
    record.update(cell_id="0123456789", options={**record["options"], "sleep_ms": 99.0},
                  cell_name=record["cell_name"].replace("sleep_ms=1.0", "sleep_ms=99.0"))
    extra = run_copy / "cells" / "0123456789-r1.json"
    extra.write_text(json.dumps(record))
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0
    assert f"warning: {extra}: cell '0123456789' is not a cell of this run (manifest.json " \
           "does not list it); not in the reports" in err
    assert "99.0" not in (run_copy / "report.md").read_text()
    assert "0123456789" not in (run_copy / "summary.csv").read_text()
    code, out, err = main(capsys, "compare", run_copy, run_copy, "--markdown", tmp_path / "c.md")
    assert f"{extra}: cell '0123456789' is not a cell of this run" in err


NA_WORKER = """
import json, sys
json.dump({"schema": 1, "status": "not_applicable", "error": "not today"}, open(sys.argv[2], "w"))
"""


def test_a_worker_claiming_not_applicable_for_a_planned_cell_is_failed(tmp_path, capsys):
    liar = fake_interpreter(tmp_path, NA_WORKER)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(liar), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    for record in records(run).values():
        assert record["status"] == "failed"
        assert "the worker said not_applicable, but the plan runs this cell" in record["error"]
        assert "not today" in record["error"]


@pytest.mark.parametrize("name", ["history.sqlite", "history.sqlite-wal", "machine-profiles",
                                  "bisect"])
def test_a_run_may_not_take_a_name_the_results_folder_keeps(name, tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX.replace('name = "hostile"', f'name = "{name}"'))
    line = one_line(*main(capsys, matrix, "--results-dir", tmp_path / "r")[::2])
    assert f"run.name: {name!r} names what the results folder keeps for itself" in line
    assert not (tmp_path / "r").exists()


def test_a_fifo_as_the_matrix_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "m.toml"
    os.mkfifo(fifo)
    done = subprocess.run([HOST_PYTHON, "-m", "runner", str(fifo), "--dry-run", "--results-dir",
                           str(tmp_path / "r")], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == \
        f"error: {fifo}: not a regular file (a FIFO, a device, a socket); a matrix is a file"
    assert not (tmp_path / "r").exists()


def test_a_second_ctrl_c_never_skips_the_reports(tmp_path, capsys, monkeypatch):
    """The first Ctrl-C as the cells end, a second while the reports are written: every
    finished record is in the reports, and the run ends 130."""
    real_cells, real_reports = pipeline.run_cells, pipeline.write_reports
    # Ctrl-C as an interactive Python has it, also when the suite runs as a background job
    # (which ignores SIGINT: then os.kill below would do nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def cells_then_ctrl_c(*args, **kwargs):
        real_cells(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)                               # interrupted here

    def ctrl_c_again(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real_reports(*args, **kwargs)

    monkeypatch.setattr(pipeline, "run_cells", cells_then_ctrl_c)
    monkeypatch.setattr(pipeline, "write_reports", ctrl_c_again)
    (tmp_path / "m.toml").write_text(MATRIX)
    try:
        code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert len(records(run)) == 4
    report = (run / "report.md").read_text()
    assert "sleep_ms=1.0" in report and "sleep_ms=2.0" in report
    assert json.loads((run / "manifest.json").read_text())["interrupted"] is True


@pytest.mark.parametrize("threshold", ["nan", "inf", "-0.1"])
def test_compare_refuses_a_threshold_that_is_not_a_finite_share(threshold, finished_run, tmp_path,
                                                               capsys):
    code, out, err = main(capsys, "compare", finished_run, finished_run, "--threshold",
                          threshold, "--markdown", tmp_path / "c.md")
    assert "--threshold must be ≥ 0" in one_line(code, err)
    assert not (tmp_path / "c.md").exists()


@FUZZ
@given(whole=st.integers(min_value=1, max_value=10**6))
def test_an_option_given_as_1_or_1_0_is_one_cell(whole):
    """The same value written as a whole number or a float is one cell with one id (a
    matrix listing both repeats a cell: one line, exit 2)."""
    def plan_ids(value: float | list[float]) -> tuple[int, str]:
        with tempfile.TemporaryDirectory() as scratch:
            matrix = Path(scratch) / "m.toml"
            matrix.write_text(hostile_matrix(value))      # TOML keeps 7 and 7.0 apart
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = cli.main(["plan", str(matrix)])
            return code, out.getvalue()

    code_int, as_int = plan_ids(whole)
    code_float, as_float = plan_ids(float(whole))
    assert code_int == code_float == 0
    ids = [line.split()[1] for text in (as_int, as_float)
           for line in text.splitlines() if line.startswith("selftest-run-host")]
    assert len(ids) == 2 and ids[0] == ids[1], (as_int, as_float)
    code, both = plan_ids([whole, float(whole)])
    assert code == 2 and "repeats cell" in both
