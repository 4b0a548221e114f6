"""Hostile matrices and command lines: whatever the input, one line on stderr and the documented
exit code (2), never a traceback, and nothing written. Property-based: hypothesis writes matrices
from the schema's own keys with hostile values (huge, negative, inf/nan, markup, control
characters, deep nesting) and raw bytes; each is run as `python -m runner MATRIX --dry-run`."""

from __future__ import annotations

import contextlib
import io
import math
import os
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from runner import cli
from runner.errors import EXIT_INTERNAL, EXIT_INTERRUPTED

HOST_PYTHON = sys.executable

ENV = f"""
[environments.host]
python = "{HOST_PYTHON}"
api = "numpy"
"""
BENCH = """
[[benchmarks]]
workload = "selftest"
environments = ["host"]
options = { behaviour = "ok", sleep_ms = 1.0 }
"""


def run_main(*argv: str) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr). No pytest fixture: hypothesis calls it
    many times in one test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(map(str, argv)))
    return code, out.getvalue(), err.getvalue()


def assert_one_line_exit_2(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def refuse(write_matrix, run_cli, results_dir, text: str, *extra: str) -> str:
    """Run a matrix that must be refused: one line, exit 2, no run folder."""
    code, _, err = run_cli(write_matrix(text, with_environments=False), *extra)
    line = assert_one_line_exit_2(code, err)
    assert list(results_dir.iterdir()) == []
    return line


# --- the tracebacks of the issue, each one line and exit 2 -----------------------------------

def test_a_matrix_that_is_not_utf8(tmp_path, run_cli, results_dir):
    path = tmp_path / "latin1.toml"
    path.write_bytes("[run]\nname = \"caf\xe9\"\n".encode("latin-1"))
    code, _, err = run_cli(path)
    assert "not UTF-8 text" in assert_one_line_exit_2(code, err)
    assert list(results_dir.iterdir()) == []


@pytest.mark.parametrize("depth", [300, 900, 5000])   # validation, the profile's copy, tomllib
def test_nesting_thousands_deep(depth, write_matrix, run_cli, results_dir):
    deep = "[" * depth + "1.0" + "]" * depth
    line = refuse(write_matrix, run_cli, results_dir, ENV + BENCH.replace("1.0", deep))
    assert "nested too deeply" in line or "options.sleep_ms: expected float" in line
    assert len(line) < 600                      # the value is shown cut, not 5000 brackets


@pytest.mark.parametrize("name", ["a[/b]", "a\nb", "![x](/etc/passwd)", "x" * 65, "",
                                  "ü", "a b", "../up"])
def test_environment_names_are_letters_digits_dot_dash_underscore(name, write_matrix, run_cli,
                                                                    results_dir):
    text = tomli_w.dumps({"environments": {name: {"python": HOST_PYTHON, "api": "numpy"}},
                          "benchmarks": [{"workload": "selftest", "environments": ["*"]}]})
    line = refuse(write_matrix, run_cli, results_dir, text)
    assert "an environment name must be letters, digits" in line


@pytest.mark.parametrize("env, fragment", [
    ({"A=B": "1"}, "'A=B': a variable name is letters"),
    ({"A\0B": "1"}, "a variable name is letters"),
    ({"": "1"}, "a variable name is letters"),
    ({"OK": "a\0b"}, "OK: the value holds a NUL character"),
    ({"PYTHONPATH": "/tmp/evil"}, "env.PYTHONPATH: PYTHON*, LD_* and PATH decide which code"),
    ({"LD_PRELOAD": "/tmp/evil.so"}, "env.LD_PRELOAD: PYTHON*, LD_* and PATH"),
    ({"PATH": "/tmp"}, "env.PATH: PYTHON*, LD_* and PATH"),
    ({"pythonstartup": "/tmp/x.py"}, "env.pythonstartup: PYTHON*"),
])
def test_env_keys_and_protected_variables_fail_at_validation(env, fragment, write_matrix,
                                                             run_cli, results_dir):
    text = tomli_w.dumps({"environments": {"host": {"python": HOST_PYTHON, "api": "numpy",
                                                    "env": env}},
                          "benchmarks": [{"workload": "selftest", "environments": ["*"]}]})
    line = refuse(write_matrix, run_cli, results_dir, text)
    assert fragment in line
    if "PYTHON" in fragment or "LD_" in fragment:
        assert "unsafe_env = true" in line


def test_unsafe_env_opts_in_and_plan_shows_every_environments_env(write_matrix, run_cli):
    text = tomli_w.dumps({
        "run": {"preallocate": False},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy", "unsafe_env": True,
                                  "env": {"PYTHONPATH": "/opt/extra", "MY_FLAG": "1"}},
                         "plain": {"python": HOST_PYTHON, "api": "numpy"}},
        "benchmarks": [{"workload": "selftest", "environments": ["*"]}]})
    code, out, err = run_cli("plan", write_matrix(text, with_environments=False))
    assert code == 0, err
    lines = out.splitlines()
    assert any(line.startswith("env host: ") and "PYTHONPATH=/opt/extra" in line
               and "MY_FLAG=1" in line and "(unsafe_env = true)" in line for line in lines)
    # [run] preallocate = false reaches every environment's workers: shown too (once).
    assert any(line.startswith("env (every environment): XLA_PYTHON_CLIENT_PREALLOCATE=false")
               for line in lines)


@pytest.mark.parametrize("text, fragment", [
    ("[run]\nrepeats = 9223372036854775807\n", "run.repeats: must be <= 1000"),
    ("[run]\ntimeout = inf\n", "run.timeout: must be a finite number, got inf"),
    ("[run]\ntimeout = nan\n", "run.timeout: must be a finite number, got nan"),
    ("[run]\nmin_time = inf\n", "run.min_time: must be a finite number"),
    ("[run]\ntimeout = 1e300\n", "run.timeout: must be <= 604800"),
    ("[run]\nseed = 4294967296\n", "run.seed: must be <= 4294967295"),
], ids=["repeats", "timeout-inf", "timeout-nan", "min_time-inf", "timeout-huge", "seed"])
def test_bounds_and_finite_numbers(text, fragment, write_matrix, run_cli, results_dir):
    assert fragment in refuse(write_matrix, run_cli, results_dir, text + ENV + BENCH)


def test_an_option_that_is_not_finite(write_matrix, run_cli, results_dir):
    line = refuse(write_matrix, run_cli, results_dir, ENV + BENCH.replace("1.0", "inf"))
    assert "options.sleep_ms: must be a finite number, got inf" in line


def test_the_cells_of_a_matrix_are_capped_before_they_are_expanded(write_matrix, run_cli,
                                                                   results_dir):
    many = ", ".join(f"{i}.0" for i in range(1, 2001))
    text = ("[run]\nrepeats = 100\n" + ENV
            + BENCH.replace("sleep_ms = 1.0", f"sleep_ms = [{many}]"))
    line = refuse(write_matrix, run_cli, results_dir, text)
    assert "benchmarks: 200000 runs (cells × repeats); at most 100000" in line


def test_results_dir_naming_a_file(write_matrix, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code = cli.main([str(write_matrix(ENV + BENCH, with_environments=False)),
                     "--results-dir", str(afile)])
    line = assert_one_line_exit_2(code, capsys.readouterr().err)
    assert f"--results-dir {afile}: is a file, not a folder" in line
    assert afile.read_text() == "x"


def test_markup_in_a_cell_name_is_printed_as_it_is(write_matrix, run_cli, monkeypatch):
    """rich markup in a user string ([/b] closes nothing) is text, in the plan and dry-run."""
    monkeypatch.setenv("COLUMNS", "300")          # one table row per line
    text = ENV + BENCH.replace('behaviour = "ok"', 'behaviour = "[/b][red]x"')
    for argv in (("plan",), ("--dry-run",)):
        args = (argv[0], write_matrix(text, with_environments=False)) if argv == ("plan",) \
            else (write_matrix(text, with_environments=False), *argv)
        code, out, err = run_cli(*args)
        assert code == 0, err
        assert "selftest-run-host-b1-behaviour=[/b][red]x-sleep_ms=1.0" in out


def test_doctor_prints_markup_in_an_interpreter_path_as_text(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "[b]odd[" / "b]"           # the path holds [b]odd[/b]
    folder.mkdir(parents=True)
    (folder / "python").symlink_to(HOST_PYTHON)
    matrix = tmp_path / "m.toml"
    matrix.write_text(ENV.replace(HOST_PYTHON, str(folder / "python")) + BENCH)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    code = cli.main(["doctor", str(matrix), "--executor", "local"])
    captured = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in captured.err
    assert "[b]odd[/b]" in captured.out.replace("\n", "")


# --- the one error path ------------------------------------------------------------------------

def test_an_internal_error_is_one_line_and_a_log_with_the_traceback(monkeypatch, write_matrix,
                                                                    capsys):
    from runner.run import pipeline

    def broken(steps, state):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(pipeline, "execute", broken)
    code = cli.main([str(write_matrix(ENV + BENCH, with_environments=False))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_INTERNAL and len(err) == 1
    assert err[0].startswith("error: internal error (ZeroDivisionError: a bug); the traceback is in ")
    log = Path(err[0].split("the traceback is in ")[1].split(" — ")[0])
    try:
        assert "Traceback" in log.read_text() and "a bug" in log.read_text()
    finally:
        log.unlink()


def test_ctrl_c_is_130_and_one_line(monkeypatch, write_matrix, capsys):
    from runner.run import pipeline

    def interrupted(steps, state):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "execute", interrupted)
    assert cli.main([str(write_matrix(ENV + BENCH, with_environments=False))]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "interrupted"


def test_an_error_line_never_carries_control_characters(tmp_path, capsys):
    code = cli.main(["report", str(tmp_path / "a\nb\x1b[31m")])
    line = assert_one_line_exit_2(code, capsys.readouterr().err)
    assert "\x1b" not in line and "a\\nb\\x1b[31m" in line


# --- property-based fuzzing of the matrix --------------------------------------------------

HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", "a[/b]", "[red]x", "\x00", "a\nb", "../x", "*", "auto", "ok", "numpy",
                     "float32", "é" * 3, "x" * 300, "PYTHONPATH", "A=B"]),
    st.text(max_size=12))
HOSTILE_NUMBER = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70),
    st.sampled_from([0, 1, -1, 2**63 - 1, 10**400 // 10**300]),
    st.floats(allow_nan=True, allow_infinity=True))
SCALAR = st.one_of(HOSTILE_TEXT, HOSTILE_NUMBER, st.booleans())
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(HOSTILE_TEXT, inner, max_size=3)), max_leaves=6)

RUN_KEYS = ["name", "repeats", "warmup_steps", "steps", "min_time", "max_time", "timeout",
            "executor", "parallel", "profile", "seed", "calibrate", "preallocate", "bogus"]
ENV_KEYS = ["image", "python", "api", "backend", "env", "unsafe_env", "extra"]
BENCH_KEYS = ["workload", "task", "batch_size", "environments", "options", "precision", "jit",
              "size", "steps", "repeats", "timeout", "device", "data", "tf32"]


def section(keys: list[str]) -> st.SearchStrategy:
    return st.dictionaries(st.sampled_from(keys), VALUE, max_size=4)


@st.composite
def matrices(draw) -> dict:
    """A matrix close enough to valid that validation goes deep: a valid skeleton (the host's
    interpreter as an environment, a selftest benchmark) with hostile values drawn into it."""
    env = {"python": HOST_PYTHON, "api": "numpy", **draw(section(ENV_KEYS))}
    env_name = draw(st.one_of(st.just("host"), HOSTILE_TEXT))
    bench = {"workload": "selftest", "environments": [env_name],
             "options": {"behaviour": "ok"}, **draw(section(BENCH_KEYS))}
    matrix = {"run": {"profile": "full", **draw(section(RUN_KEYS))},
              "environments": {env_name: env}, "benchmarks": [bench]}
    if draw(st.booleans()):
        matrix["profiles"] = {draw(st.sampled_from(["smoke", "full", "x"])): draw(section(
            RUN_KEYS + BENCH_KEYS))}
    return matrix


def check_any_outcome(text: bytes | str) -> None:
    """Whatever the matrix: 0 (a valid plan) or 2 with one line; no traceback, no internal
    error, no run folder."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "fuzz.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        results = Path(scratch) / "results"
        code, out, err = run_main(str(path), "--dry-run", "--results-dir", str(results))
        assert code in (0, 2), (code, err)
        assert "Traceback" not in err + out
        if code == 2:
            assert_one_line_exit_2(code, err)
        assert not results.exists() or not any(results.iterdir())


# Modest by default (the fast suite stays fast); HOSTILE_FUZZ_EXAMPLES=5000 fuzzes deeper.
FUZZ = settings(max_examples=int(os.environ.get("HOSTILE_FUZZ_EXAMPLES", "40")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@FUZZ
@given(matrices())
def test_fuzzed_matrices_are_a_plan_or_one_line(matrix):
    try:
        text = tomli_w.dumps(matrix)
    except (TypeError, ValueError):       # what TOML cannot hold (a NUL key) is not a matrix
        return
    check_any_outcome(text)


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([b"", b"[run]\n", ENV.encode(), b"\xff"]))
def test_fuzzed_bytes_are_one_line(data, prefix):
    check_any_outcome(prefix + data)


def test_the_fuzz_strategy_reaches_valid_plans():
    """The skeleton is valid: the fuzz explores around matrices that pass, not only noise."""
    text = tomli_w.dumps({"run": {"profile": "full"},
                          "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"}},
                          "benchmarks": [{"workload": "selftest", "environments": ["host"],
                                          "options": {"behaviour": "ok"}}]})
    check_any_outcome(text)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "m.toml"
        path.write_text(text)
        assert run_main("plan", str(path))[0] == 0


def test_numbers_that_look_finite_to_python_only():
    """TOML's inf/nan parse to floats that pass `> 0`: the schema must still refuse them."""
    assert math.inf > 0 and not (math.nan > 0)
    with tempfile.TemporaryDirectory() as scratch:
        for value in ("inf", "+inf", "nan", "-nan"):
            path = Path(scratch) / "m.toml"
            path.write_text(textwrap.dedent(f"[run]\nmax_time = {value}\n") + ENV + BENCH)
            code, _, err = run_main(str(path), "--dry-run", "--results-dir",
                                    os.path.join(scratch, "r"))
            assert "run.max_time: must be" in assert_one_line_exit_2(code, err)
