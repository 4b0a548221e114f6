"""Names and paths in a matrix and on the command line: a relative `python` is the matrix
folder's, resolved once and kept absolute (a resume from elsewhere runs the same one); an
`image` is one folder name under images/; a run may not take a name the results folder keeps;
the matrix is a regular file (a FIFO is refused, never waited on); a preset is a local folder
(a hub handle is refused when the matrix is read); `compare --threshold` is a finite share;
an option given as 1 or 1.0 is one cell. One line, exit 2, nothing written."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given, strategies as st

from runner import cli
from runner.paths import REPO_ROOT
from tests.hostile.helpers import FUZZ, HOST_PYTHON
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import MATRIX, hostile_matrix, main, one_line, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


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
