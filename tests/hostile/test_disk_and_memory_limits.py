"""Limits of the host: a results folder too small for a run's reserve is left as it was (no
run-folder skeleton, one line, exit 2), and a local cell above DL_BENCH_LOCAL_MEMORY is killed
by its supervisor and recorded `oom`. The cells run in this interpreter."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import tomli_w

from runner.paths import REPO_ROOT
from tests.hostile.helpers import HOST_PYTHON
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import MATRIX, main, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


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
