"""benchmarks/overhead.py --from-run, the GPU check's `overhead` part, on a real NumPy run: it
builds the cell's step as the worker does (it broke on the H200 of 2026-11-28 when the API's
modules moved into the API records, untested until then)."""

from __future__ import annotations

import json
import subprocess
import sys

from runner.paths import REPO_ROOT
from tests.matrices import matrix_text, this_interpreter


def test_overhead_from_a_run_pairs_the_run_with_a_bare_loop(tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(matrix_text("oh", repeats=1, steps=20, settle=0,
                                  environments={"numpy": this_interpreter()},
                                  benchmarks=[{"workload": "matmul", "options": {"n": 64}}]),
                      encoding="utf-8")
    subprocess.run([sys.executable, "-m", "runner", str(matrix), "--results-dir",
                    str(tmp_path / "results")], cwd=REPO_ROOT, check=True, capture_output=True)
    (run,) = (tmp_path / "results" / "oh").iterdir()
    pairs = tmp_path / "pairs.json"
    out = subprocess.run([sys.executable, "benchmarks/overhead.py", "--from-run", str(run),
                          "--apis", "numpy", "--python", sys.executable, "--rounds", "2",
                          "--json", str(pairs)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(pairs.read_text(encoding="utf-8"))
    assert row["api"] == "numpy" and row["n"] == 64 and row["bare_ms"] > 0
    assert 0.2 < row["runner_over_bare"] < 5 and row["rounds"] == 2
