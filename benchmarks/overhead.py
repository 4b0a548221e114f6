"""The runner's own cost: harness overhead and fixed cost per process, for NumPy, torch and JAX.

    .venv/bin/python benchmarks/overhead.py [--apis numpy torch jax] [--n 512] [--rounds 3]

Harness overhead: the runner's median ms/step of the matmul cell (steps = "auto", block samples)
÷ a bare loop of the same product in the same environment (`block` products, one device
synchronisation at the end, median over 15 such blocks). Targets: ≤ 1.03 on a CPU, ≤ 1.01 on a
GPU. Fixed cost per process: the worker process's wall time minus its timed window, and that
minus the framework's import (target ≤ 2 s beyond the import). A benchmark script: it measures
and prints, it does not assert; rounds alternate bare and runner so drift hits both alike.
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
sys.path.insert(0, str(REPO))

from runner.environments import venvs  # noqa: E402

IMAGES = {"numpy": "numpy", "torch": "torch", "jax": "jax"}
SETUP = {
    "numpy": """
        import numpy as np
        rng = np.random.default_rng(0)
        a = rng.standard_normal((1, {n}, {n}), dtype=np.float32)
        b = rng.standard_normal((1, {n}, {n}), dtype=np.float32)
        product, sync = (lambda: np.matmul(a, b)), (lambda out: None)
    """,
    "torch": """
        import torch
        g = torch.Generator().manual_seed(0)
        a = torch.randn(1, {n}, {n}, generator=g); b = torch.randn(1, {n}, {n}, generator=g)
        product = lambda: torch.matmul(a, b)
        sync = (lambda out: torch.cuda.synchronize()) if torch.cuda.is_available() else (lambda out: None)
    """,
    "jax": """
        import jax, jax.numpy as jnp, numpy as np
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.standard_normal((1, {n}, {n}), dtype=np.float32))
        b = jnp.asarray(rng.standard_normal((1, {n}, {n}), dtype=np.float32))
        f = jax.jit(jnp.matmul)
        product, sync = (lambda: f(a, b)), (lambda out: out.block_until_ready())
    """,
}
TIMED_LOOP = """
import statistics, time
for _ in range(5):
    sync(product())
per_product = []
for _ in range(15):
    started = time.perf_counter()
    for _ in range({block}):
        out = product()
    sync(out)
    per_product.append((time.perf_counter() - started) / {block} * 1000)
print(statistics.median(per_product))
"""


def bare_ms(api: str, n: int, block: int) -> float:
    code = textwrap.dedent(SETUP[api]).format(n=n) + TIMED_LOOP.format(block=block)
    python = venvs.build(IMAGES[api], "cpu").python
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def runner_record(api: str, n: int, folder: Path) -> dict:
    matrix = folder / f"overhead-{api}.toml"
    matrix.write_text(textwrap.dedent(f"""
        [run]
        name = "overhead-{api}"
        repeats = 1
        warmup_steps = 3
        profile = "full"
        [environments.{api}]
        image = "{IMAGES[api]}"
        api = "{api}"
        [[benchmarks]]
        workload = "matmul"
        options = {{ n = {n} }}
    """))
    results = folder / "results"
    subprocess.run([sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results)],
                   cwd=REPO, check=True, capture_output=True)
    newest = sorted((results / f"overhead-{api}").iterdir())[-1]
    (record,) = [json.loads(p.read_text()) for p in (newest / "cells").glob("*.json")]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apis", nargs="+", default=list(IMAGES), choices=list(IMAGES))
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--block", type=int, default=20, help="products per bare-loop sample")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for api in args.apis:
            ratios, fixed, beyond = [], [], []
            for k in range(1, args.rounds + 1):
                bare = bare_ms(api, args.n, args.block)
                record = runner_record(api, args.n, Path(tmp))
                ratio = record["median_ms"] / bare
                rest = record["wall_s"] - record["train_s"]
                ratios.append(ratio)
                fixed.append(rest)
                beyond.append(rest - record["import_s"])
                print(f"{api} round {k}: runner {record['median_ms']:.4f} ms/step "
                      f"(blocks of {record['calls_per_sample']}) bare {bare:.4f} ms "
                      f"ratio {ratio:.3f} | process {record['wall_s']:.2f} s: import "
                      f"{record['import_s']:.2f}, setup {record['setup_s']:.2f}, warm-up "
                      f"{sum(record['warmup_s']):.2f}, timed {record['train_s']:.2f}", flush=True)
            print(f"== {api} matmul n={args.n}: overhead runner/bare {statistics.median(ratios):.3f}"
                  f" (target ≤ 1.03 on CPU); fixed cost per process {statistics.median(fixed):.2f} s, "
                  f"{statistics.median(beyond):.2f} s beyond the import (target ≤ 2 s)", flush=True)


if __name__ == "__main__":
    main()
