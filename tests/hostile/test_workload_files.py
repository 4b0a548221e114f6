"""A user's workload file too deep or too big to read: Python nested too deeply for the parser
(or for a default to be written back) is one line naming the file, and the workload's code
(its file and the modules it imports) is refused by its size before a byte of a module is
read — a 2 GB module beside it that it does not import is never read at all."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from tests.hostile.helpers import HOST_PYTHON, at_most_1_gb_of_memory
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import main, one_line
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


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
