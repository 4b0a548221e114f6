"""Strings that reach the terminal: a matrix value the runner prints or uses may not hold a
control character (environment variables, the interpreter, `[history] url`, baseline options:
one line, exit 2, nothing written), every path or name a user or a file controls is printed
escaped (a matrix's path, a set-aside record's name), and a long value is printed shortened
while records, reports and the manifest keep it whole. The cells run in this interpreter."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given, strategies as st

from runner import cli
from tests.hostile.helpers import FUZZ, HOST_PYTHON
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import MATRIX, hostile_matrix, main, one_line, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


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
