"""Variables a matrix may set: without `unsafe_env = true`, none that makes a shell wrapper
(`python = "run.sh"`), another interpreter or the C library load code of the setter's choosing
(BASH_ENV, ENV, BASH_FUNC_*, GCONV_PATH, GLIBC_TUNABLES, PERL5OPT, an exported function, …);
and an existing interpreter is probed with the environment its workers get (the allow-listed
host variables), never the host's whole environment. The cells run in this interpreter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomli_w

from tests.hostile.helpers import HOST_PYTHON
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import hostile_matrix, main, one_line
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401
from tests.matrices import this_interpreter


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
