"""Runner overhead on the matmul cell: the runner's median step time against the same product
in a bare hand-written loop, in the same environment, alternating A/B rounds.

    .venv/bin/python tests/perf/overhead.py [--image numpy] [--api numpy] [--n 1024] [--steps 60]

Prints both medians per round and the ratio runner/bare (target ≤ 1.03 on CPU). A benchmark
script, not a test: it measures, it does not assert."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runner.environments import venvs  # noqa: E402

BARE = {
    "numpy": """
        import numpy as np, time, statistics
        rng = np.random.default_rng(0)
        a = rng.standard_normal((1, {n}, {n}), dtype=np.float32)
        b = rng.standard_normal((1, {n}, {n}), dtype=np.float32)
        for _ in range({warmup}): np.matmul(a, b)
        times = []
        for _ in range({steps}):
            t = time.perf_counter(); np.matmul(a, b); times.append(time.perf_counter() - t)
        print(statistics.median(times) * 1000)
    """,
    "torch": """
        import torch, time, statistics
        g = torch.Generator().manual_seed(0)
        a = torch.randn(1, {n}, {n}, generator=g); b = torch.randn(1, {n}, {n}, generator=g)
        for _ in range({warmup}): torch.matmul(a, b)
        times = []
        for _ in range({steps}):
            t = time.perf_counter(); torch.matmul(a, b); times.append(time.perf_counter() - t)
        print(statistics.median(times) * 1000)
    """,
}


def runner_median(image: str, api: str, n: int, steps: int, warmup: int, folder: Path) -> float:
    matrix = folder / "overhead.toml"
    matrix.write_text(textwrap.dedent(f"""
        [run]
        name = "overhead"
        repeats = 1
        steps = {steps}
        warmup_steps = {warmup}
        profile = "full"
        [environments.env]
        image = "{image}"
        api = "{api}"
        [[benchmarks]]
        workload = "matmul"
        options = {{ n = {n} }}
    """))
    results = folder / "results"
    subprocess.run([sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results)],
                   cwd=REPO, check=True, capture_output=True)
    newest = sorted((results / "overhead").iterdir())[-1]
    (record,) = [json.loads(p.read_text()) for p in (newest / "cells").glob("*.json")]
    return record["median_ms"]


def bare_median(image: str, api: str, n: int, steps: int, warmup: int) -> float:
    code = textwrap.dedent(BARE[api]).format(n=n, steps=steps, warmup=warmup)
    python = venvs.build(image).python
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="numpy")
    parser.add_argument("--api", default="numpy", choices=sorted(BARE))
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(1, args.rounds + 1):
            bare = bare_median(args.image, args.api, args.n, args.steps, args.warmup)
            ran = runner_median(args.image, args.api, args.n, args.steps, args.warmup, Path(tmp))
            ratios.append(ran / bare)
            print(f"round {k}: runner {ran:.3f} ms  bare {bare:.3f} ms  ratio {ran / bare:.3f}")
    print(f"{args.api} matmul n={args.n}: median ratio runner/bare = {statistics.median(ratios):.3f} "
          f"over {args.rounds} rounds (target ≤ 1.03)")


if __name__ == "__main__":
    main()
