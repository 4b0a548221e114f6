"""The profiler's own cost: per workload and framework, a cell's profiled step against the same
steps unprofiled in the same pass (profile_overhead = profiled ÷ unprofiled, both synchronised
after every call), beside the cell's timed median, and what the profiled pass adds to a run.

    .venv/bin/python benchmarks/profile_overhead.py [--rounds 2] [--results-dir DIR]

Runs examples/why.toml's environments on tiny matmul, elementwise and CNN cells (and Gemma
generate on Keras), each with a profiled pass (--profile-cells '*'), `--rounds` times, and
prints per cell the timed median (blocks of calls, other processes), the unprofiled and the
profiled step of the pass and their ratio (medians over the rounds), and the wall time of the
timed repeats against that of the profiled pass. A benchmark script: it
measures and prints, it asserts nothing.

What to expect: the profiled pass records every op, so on a CPU a step of a few hundred µs reads 1.5–2× (the profiler's per-op cost over few,
short ops) while a step of tens of ms reads within ±10 %; on a GPU the per-kernel cost of CUPTI
is of the order of µs, so a step of thousands of small kernels (Keras on torch generate) reads
slower than one of a few large ones (an 8192³ product), which should read within a few %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MATRIX = """
[run]
name = "profile-overhead"
repeats = 2
warmup_steps = 2
steps = "auto"
profile = "smoke"

[profiles.smoke]
size = "tiny"

[profiling]
cells = ["*"]
steps = 5
warmup = 1

[environments.torch]
image = "torch"
api = "torch"
[environments.jax]
image = "jax"
api = "jax"
[environments.tensorflow]
image = "tensorflow"
api = "tensorflow"
[environments.numpy]
image = "numpy"
api = "numpy"
[environments.keras-torch]
image = "torch"
api = "keras"
backend = "torch"
[environments.keras-jax]
image = "jax"
api = "keras"
backend = "jax"

[[benchmarks]]
workload = "matmul"
environments = ["torch", "jax", "tensorflow", "numpy"]

[[benchmarks]]
workload = "elementwise"
environments = ["torch", "jax", "tensorflow", "numpy"]

[[benchmarks]]
workload = "cnn"
batch_size = 64
environments = ["torch", "jax", "keras-torch", "keras-jax"]

[[benchmarks]]
workload = "gemma"
task = "generate"
batch_size = 4
precision = "bfloat16"
environments = ["keras-torch", "keras-jax"]
"""


def one_round(folder: Path) -> dict[str, dict[str, float]]:
    matrix = folder / "matrix.toml"
    matrix.write_text(textwrap.dedent(MATRIX), encoding="utf-8")
    results = folder / "results"
    subprocess.run([sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results)],
                   cwd=REPO, check=True, capture_output=True)
    run_dir = sorted((results / "profile-overhead").iterdir())[-1]
    walls: dict[str, float] = {}
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        walls[record["cell_name"]] = walls.get(record["cell_name"], 0.0) + (record["wall_s"] or 0)
    out = {}
    for path in sorted((run_dir / "profiles").glob("*/profile.json")):
        profile = json.loads(path.read_text())
        if profile.get("status") != "ok":
            print(f"! {profile['cell_name']}: {profile.get('error')}", flush=True)
            continue
        out[profile["cell_name"]] = {"timed_ms": profile["timed_median_ms"],
                                     "unprofiled_ms": profile["reference_step_ms"],
                                     "profiled_ms": profile["profiled_step_ms"],
                                     "ratio": profile["profile_overhead"],
                                     "timed_wall_s": walls.get(profile["cell_name"], 0.0),
                                     "profile_wall_s": profile["wall_s"] or 0.0}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            folder = Path(tmp) / f"round{k}"
            folder.mkdir()
            rounds.append(one_round(folder))
            print(f"round {k + 1} of {args.rounds} done", flush=True)
    print(f"{'cell':<52} {'timed ms':>10} {'unprofiled ms':>14} {'profiled ms':>12} "
          f"{'ratio':>7} {'timed wall s':>13} {'profile wall s':>15}")
    for cell in sorted(set().union(*rounds)):
        seen = [r[cell] for r in rounds if cell in r]

        def median(key: str, seen: list = seen) -> float:
            return statistics.median(s[key] for s in seen)

        print(f"{cell:<52} {median('timed_ms'):>10.4g} {median('unprofiled_ms'):>14.4g} "
              f"{median('profiled_ms'):>12.4g} "
              f"{median('ratio'):>7.3f} {median('timed_wall_s'):>13.1f} "
              f"{median('profile_wall_s'):>15.1f}", flush=True)


if __name__ == "__main__":
    main()
