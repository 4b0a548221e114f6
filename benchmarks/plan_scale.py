"""How long a big matrix takes from the command to its first cell: loading, planning, the
manifest, preparing the environment, the first cell itself.

    .venv/bin/python benchmarks/plan_scale.py [--cells 300 1200 10000] [--runner-root DIR]

Each size is one matrix of `selftest` cells (options.sleep_ms = 1, 2, …, N ms: N distinct cells,
1 repeat, 1 timed step) in one environment, this interpreter used as it is (`python = ...`, so
no environment is built). The runner is started as a user starts it (`python -m runner MATRIX`),
and the script prints the seconds from the start to the line that names the run folder (the
matrix is loaded and planned), to the environment's ready line (the first manifest is written
before it) and to the line of the first finished cell; then it stops the run with Ctrl-C. Target: 10 000 cells to the first cell in under 10 s on a 2-core
VM. `--runner-root` runs another checkout's runner (e.g. an older one, to compare). A benchmark
script: it measures and prints, it does not assert.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT_S = 3600.0


def matrix_text(cells: int) -> str:
    sleeps = ", ".join(f"{i}.0" for i in range(1, cells + 1))
    return f"""
[run]
name = "scale"
repeats = 1
warmup_steps = 1
steps = 1
timeout = 60
profile = "full"

[environments.host]
python = "{sys.executable}"
api = "numpy"

[[benchmarks]]
workload = "selftest"
environments = ["host"]
options = {{ behaviour = "ok", sleep_ms = [{sleeps}] }}
"""


def time_to_first_cell(cells: int, runner_root: Path) -> list[float | None]:
    """Seconds to the run-folder line, to the environment's line, to the first cell's line."""
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as scratch:
        matrix = Path(scratch) / "scale.toml"
        matrix.write_text(matrix_text(cells), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(runner_root), "COLUMNS": "200"}
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "runner", str(matrix), "--results-dir",
             str(Path(scratch) / "results")], cwd=runner_root, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        folder = ready = first = None
        try:
            for line in process.stdout:
                now = time.monotonic() - started
                if folder is None and line.startswith("run folder:"):
                    folder = now
                if ready is None and line.lstrip().startswith(("✓ environment", "✗ environment")):
                    ready = now
                if line.lstrip().startswith(("✓ selftest", "✗ selftest")):
                    first = now
                    break
                if now > LIMIT_S:
                    break
        finally:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        return [folder, ready, first]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[300, 1200, 10_000])
    parser.add_argument("--runner-root", type=Path, default=REPO)
    args = parser.parse_args()
    print(f"runner: {args.runner_root}; {os.cpu_count()} CPUs")
    print(f"{'cells':>7} {'planned':>9} {'environment ready':>18} {'first cell':>11}")
    for cells in args.cells:
        times = time_to_first_cell(cells, args.runner_root.resolve())
        shown = [f"{v:.1f} s" if v is not None else "–" for v in times]
        print(f"{cells:>7} {shown[0]:>9} {shown[1]:>18} {shown[2]:>11}", flush=True)


if __name__ == "__main__":
    main()
