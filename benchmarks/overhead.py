"""The runner's own cost: harness overhead and fixed cost per process, for NumPy, torch, JAX and
TensorFlow.

    .venv/bin/python benchmarks/overhead.py [--apis numpy torch jax tensorflow] [--n 512] [--rounds 3]

Harness overhead: the runner's median ms/step of the matmul cell (steps = "auto", block samples)
÷ a bare loop of the same product in the same environment, timed the same way: blocks of as many
products as the runner's calibration chose (only the last one's output kept, as in the
runner's loop: holding the previous output changes what the allocator does; one n×n product,
2-D operands, as the runner's matmul at batch 1), one device
synchronisation per block, for as long as
the runner's timed window, median over the blocks. Rounds run in ABBA order (runner then bare,
bare then runner) and the overhead is the median of the rounds' ratios, shown with their
quartiles: on a shared 2-core VM one round's ratio swings by ±20 % with the neighbours' load. Targets: ≤ 1.03 on a CPU, ≤ 1.01 on a
GPU. Fixed cost per process: the worker process's wall time minus its timed window, and that
minus the framework's import (target ≤ 2 s beyond the import). A benchmark script: it measures
and prints, it does not assert; rounds alternate bare and runner so drift hits both alike.

    .venv/bin/python benchmarks/overhead.py --from-run RUN_DIR [--python PATH] [--json OUT]

pairs the matmul cells of a finished run instead (the GPU check's way: benchmarks/gpu_check/):
for each cell, one process in its interpreter (--python: an existing one, as the run's
`python = …` environments; else the image's CPU environment) builds the cell's step as the worker
does, with the run's block size, and alternates the worker's clock with a bare loop; printed and
written: the run's ms/step ÷ that bare loop's, and the in-process clock ÷ bare.

    .venv/bin/python benchmarks/overhead.py --snippets [--apis ...] [--n 3000] [--rounds 4]

pairs the runner's matmul cell with the JAX-basics study's own `%timeit` snippet per native API
(numpy, torch, JAX, TensorFlow), interleaved (ABBA rounds), in the runner's own environments:
runner ÷ the study's statement (`x @ x`; JAX `x @ x.T`; TensorFlow eager) and runner ÷ the
runner's work as a snippet (`a @ b`, jit as the runner's), each with its 95 % interval over the
rounds and the ratio of the fastest of each side; their quotient is the part that is different
work, the rest is the runner's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.environments import venvs  # noqa: E402
from runner.schema.matrix import worker_env  # noqa: E402
from runner.schema.tables import EnvironmentSpec, RunSettings  # noqa: E402
from runner.worker.overhead import ROUNDS as ROUNDS_IN_PROCESS  # noqa: E402
from runner.worker.protocol import CellSpec  # noqa: E402

IMAGES = {"numpy": "numpy", "torch": "torch", "jax": "jax", "tensorflow": "tensorflow"}
SETUP = {
    "numpy": """
        import numpy as np
        rng = np.random.default_rng(0)
        a = rng.standard_normal(({n}, {n}), dtype=np.float32)
        b = rng.standard_normal(({n}, {n}), dtype=np.float32)
        product, sync = (lambda: np.matmul(a, b)), (lambda out: None)
    """,
    "torch": """
        import torch
        g = torch.Generator().manual_seed(0)
        a = torch.randn({n}, {n}, generator=g); b = torch.randn({n}, {n}, generator=g)
        product = lambda: torch.matmul(a, b)
        sync = (lambda out: torch.cuda.synchronize()) if torch.cuda.is_available() else (lambda out: None)
    """,
    "jax": """
        import jax, jax.numpy as jnp, numpy as np
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.standard_normal(({n}, {n}), dtype=np.float32))
        b = jnp.asarray(rng.standard_normal(({n}, {n}), dtype=np.float32))
        f = jax.jit(jnp.matmul)
        product, sync = (lambda: f(a, b)), (lambda out: out.block_until_ready())
    """,
    # The runner's TensorFlow matmul: jit "auto" is a tf.function (graph), as here.
    "tensorflow": """
        import numpy as np, tensorflow as tf
        rng = np.random.default_rng(0)
        a = tf.constant(rng.standard_normal(({n}, {n}), dtype=np.float32))
        b = tf.constant(rng.standard_normal(({n}, {n}), dtype=np.float32))
        f = tf.function(tf.matmul)
        product = lambda: f(a, b)
        gpu = bool(tf.config.list_physical_devices("GPU"))
        sync = (lambda out: tf.test.experimental.sync_devices()) if gpu else (lambda out: None)
    """,
}
TIMED_LOOP = """
import statistics, time
for _ in range(5):
    sync(product())
per_product = []
window_started = time.perf_counter()
while time.perf_counter() - window_started < {seconds} or len(per_product) < 10:
    started = time.perf_counter()
    for _ in range({block} - 1):
        product()
    sync(product())
    per_product.append((time.perf_counter() - started) / {block} * 1000)
print(statistics.median(per_product))
"""


# One process, the worker's own code: the cell's Bench built by the worker's API module, its block
# calibrated as the worker does, then runner.worker.overhead's paired rounds (the worker's clock
# and a bare loop over the same step, alternated ROUNDS times for a quarter second each: both
# sides see the machine at nearly the same moment, which isolates the clock's own cost from the
# process-to-process spread). `runner doctor --measure` runs the same rounds in a cell.
IN_PROCESS = """
import json, sys
from runner.worker.__main__ import import_modules, prepare_process_environment
from runner.worker.bench import calibrate_block
from runner.worker.overhead import paired_rounds
from runner.worker.protocol import CellSpec

spec = CellSpec.from_dict(json.loads(sys.argv[1]))
prepare_process_environment(spec)
package, workload = import_modules(spec)
bench = workload.build(spec, package.Framework(spec))
# The run's own block size where it is known (its first repeat calibrated it), else calibrated.
block = spec.calls_per_sample or calibrate_block(bench.step, bench.sync)[0]
json.dump(paired_rounds(bench, block, rounds=int(sys.argv[2])), sys.stdout)
"""


def interpreter(api: str, python: str | None) -> str:
    """The given interpreter, else the image's CPU environment (built once, cached)."""
    return python or str(venvs.build(IMAGES[api], "cpu").python)


def in_process(api: str, record: dict, python: str | None = None,
               rounds: int = ROUNDS_IN_PROCESS, cell_env: dict | None = None) -> dict:
    fields = CellSpec.__dataclass_fields__
    spec = {name: record[name] for name in fields if name in record} | {"result_path": ""}
    env = {"PATH": "/usr/bin:/bin"} if python is None else dict(os.environ)
    # The cell's own variables (preallocation, XLA flags): the worker ran with them.
    env.update(cell_env or {}, PYTHONPATH=str(REPO))
    out = subprocess.run([interpreter(api, python), "-c", IN_PROCESS, json.dumps(spec),
                          str(rounds)], check=False, capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"in-process measure failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cell_env(matrix: dict, environment: str) -> dict:
    """The variables the run gave this environment's workers (the schema's worker_env)."""
    run, env = matrix.get("run", {}), matrix["environments"][environment]
    return worker_env(RunSettings(**run), EnvironmentSpec(**env))


def from_run(run_dir: Path, apis: list[str], python: str | None, rounds: int) -> list[dict]:
    """The matmul cells of a finished run, each paired in one process of its interpreter."""
    cells: dict[str, list[dict]] = {}
    for path in sorted((run_dir / "cells").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("workload") == "matmul" and record.get("status") == "ok" \
                and record.get("api") in apis:
            cells.setdefault(record["cell_id"], []).append(record)
    matrix = tomllib.loads((run_dir / "matrix.toml").read_text())
    rows = []
    for records in cells.values():
        first = records[0]
        runner_ms = statistics.median(r["median_ms"] for r in records)
        paired = in_process(first["api"], first, python, rounds,
                            cell_env(matrix, first["environment"]))
        if "error" in paired:
            raise SystemExit(f"{first['cell_name']}: {paired['error']}")
        row = {"cell": first["cell_name"], "api": first["api"], "precision": first["precision"],
               "n": first["options"]["n"], "repeats": len(records), "runner_ms": runner_ms,
               "bare_ms": paired["bare_ms"], "runner_over_bare": runner_ms / paired["bare_ms"],
               "clock_over_bare": paired["ratio"], "quartiles": paired["quartiles"],
               "calls_per_sample": paired["calls_per_sample"], "rounds": paired["rounds"]}
        rows.append(row)
        print(f"== {row['api']} {row['precision']} matmul n={row['n']}: runner "
              f"{runner_ms:.4f} ms/step ({len(records)} repeat(s)) ÷ bare {row['bare_ms']:.4f} "
              f"ms = {row['runner_over_bare']:.3f}; in one process, the worker's clock ÷ bare "
              f"{paired['ratio']:.3f} (quartiles {paired['quartiles'][0]:.3f}–"
              f"{paired['quartiles'][1]:.3f}, blocks of {paired['calls_per_sample']})",
              flush=True)
    return rows


def bare_ms(api: str, n: int, block: int, seconds: float) -> float:
    """Median ms per product of a bare loop timed like the runner's window: blocks of `block`
    products, one synchronisation per block, for `seconds` of wall time."""
    code = textwrap.dedent(SETUP[api]).format(n=n) + TIMED_LOOP.format(block=block,
                                                                      seconds=seconds)
    out = subprocess.run([interpreter(api, None), "-c", code], check=True, capture_output=True, text=True)
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


# --- the study's own snippets, paired with the runner's cells (issue 49 item 11) ----------------
# The JAX-basics study timed its products with %timeit lines; the runner multiplies two seeded
# matrices (a @ b, jax.jit / tf.function at jit "auto"). Each API's snippet runs in its own
# environment as %timeit does (timeit's autorange, then the best of REPEATS runs per call), once
# as the study wrote it and once doing the runner's work, so the ratio runner ÷ snippet splits
# into different work (study ÷ same-work) and the rest (runner ÷ same-work).
SNIPPETS = {   # api: (setup, the study's statement, the runner's work as a snippet)
    "numpy": ("import numpy as np\nrng = np.random.default_rng(0)\n"
              "x = rng.standard_normal(({n}, {n}), dtype=np.float32)\n"
              "a = rng.standard_normal(({n}, {n}), dtype=np.float32); b = a.copy()",
              "x @ x", "a @ b"),
    "torch": ("import torch\nx = torch.randn({n}, {n})\na = torch.randn({n}, {n}); "
              "b = torch.randn({n}, {n})", "x @ x", "a @ b"),
    "jax": ("import jax, jax.numpy as jnp\nx = jax.random.normal(jax.random.key(0), ({n}, {n}))"
            "\na = x + 1; b = x - 1\nf = jax.jit(jnp.matmul)\nf(a, b).block_until_ready()",
            "(x @ x.T).block_until_ready()", "f(a, b).block_until_ready()"),
    "tensorflow": ("import tensorflow as tf\nx = tf.random.normal(({n}, {n}))\na = x + 1; "
                   "b = x - 1\nf = tf.function(tf.matmul)\nf(a, b)",
                   "tf.matmul(x, x).numpy()", "f(a, b).numpy()"),
}
SNIPPET_REPEATS = 7
SNIPPET = """
import json, timeit
{setup}
out = {{}}
for name, stmt in (("study", {study!r}), ("same_work", {same!r})):
    timer = timeit.Timer(stmt, globals=globals())
    number, _ = timer.autorange()
    out[name] = min(timer.repeat({repeats}, number)) / number * 1000
print(json.dumps(out))
"""


def snippet_ms(api: str, n: int) -> dict[str, float]:
    """ms per call of the study's statement and of the runner's work, best of SNIPPET_REPEATS
    autoranged runs, in the API's CPU environment (one process)."""
    setup, study, same = SNIPPETS[api]
    code = SNIPPET.format(setup=setup.format(n=n), study=study, same=same, repeats=SNIPPET_REPEATS)
    out = subprocess.run([interpreter(api, None), "-c", code], check=True, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of per-round ratios and its 95 % t interval (rounds are pairs: each
    round's two sides ran back to back)."""
    import math

    from scipy.stats import t

    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = float(t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def snippets(apis: list[str], n: int, rounds: int) -> None:
    """Per API, `rounds` rounds in ABBA order of the runner's matmul cell (a run of its own, one
    repeat) and the snippets; each ratio printed with its interval over the rounds, and the
    ratio of the fastest of each side (the study's own way of reading %timeit)."""
    with tempfile.TemporaryDirectory() as tmp:
        for api in apis:
            runner, study, same = [], [], []
            for k in range(rounds):
                first, second = (("runner", "snippet") if k % 2 == 0 else ("snippet", "runner"))
                for side in (first, second):
                    if side == "runner":
                        runner.append(runner_record(api, n, Path(tmp))["median_ms"])
                    else:
                        found = snippet_ms(api, n)
                        study.append(found["study"])
                        same.append(found["same_work"])
                print(f"{api} round {k + 1}: runner {runner[-1]:.2f} ms, study snippet "
                      f"{study[-1]:.2f} ms, same-work snippet {same[-1]:.2f} ms", flush=True)
            for name, side in (("study snippet", study), ("same-work snippet", same)):
                mean, low, high = interval([r / s for r, s in zip(runner, side, strict=True)])
                print(f"== {api} n={n}: runner ÷ {name} {mean:.3f} (95 % CI {low:.3f}–{high:.3f},"
                      f" {rounds} rounds); fastest of each side {min(runner) / min(side):.3f}",
                      flush=True)
            mean, low, high = interval([s / w for s, w in zip(study, same, strict=True)])
            print(f"== {api} n={n}: the study's statement ÷ the runner's work as a snippet "
                  f"{mean:.3f} (95 % CI {low:.3f}–{high:.3f}): the part that is different work",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apis", nargs="+", default=list(IMAGES), choices=list(IMAGES))
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--from-run", type=Path, metavar="RUN_DIR",
                        help="pair the matmul cells of this finished run (no new runner run)")
    parser.add_argument("--python", help="an existing interpreter for every API (the run's "
                                         "`python = …`) instead of the images' CPU environments")
    parser.add_argument("--json", type=Path, help="with --from-run: write the pairs here")
    parser.add_argument("--snippets", action="store_true",
                        help="pair the runner's matmul cell with the study's %%timeit snippet "
                             "(and the runner's work as a snippet), interleaved, per API "
                             "(the study's n = 3000 unless --n is given)")
    args = parser.parse_args()
    if args.snippets:
        n = args.n if args.n != parser.get_default("n") else 3000
        snippets(args.apis, n, args.rounds if args.rounds != parser.get_default("rounds") else 4)
        return
    if args.from_run:
        rounds = args.rounds if args.rounds != parser.get_default("rounds") else ROUNDS_IN_PROCESS
        rows = from_run(args.from_run, args.apis, args.python, rounds)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        if not rows:
            raise SystemExit(f"{args.from_run}: no finished matmul cell of {', '.join(args.apis)}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for api in args.apis:
            ratios, fixed, beyond = [], [], []
            block = 8
            for k in range(1, args.rounds + 1):
                # ABBA order: drift on a shared machine hits the bare loop and the runner alike.
                if k % 2:
                    record = runner_record(api, args.n, Path(tmp))
                    block = record["calls_per_sample"]
                    bare = bare_ms(api, args.n, block, record["train_s"])
                else:
                    bare = bare_ms(api, args.n, block, 1.0)
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
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            print(f"== {api} matmul n={args.n}: overhead runner/bare {statistics.median(ratios):.3f}"
                  f" (rounds' quartiles {quartiles[0]:.3f}–{quartiles[2]:.3f})"
                  f" (target ≤ 1.03 on CPU); fixed cost per process {statistics.median(fixed):.2f} s, "
                  f"{statistics.median(beyond):.2f} s beyond the import (target ≤ 2 s)", flush=True)
            paired = in_process(api, record)
            print(f"== {api} matmul n={args.n}: in-process overhead (the worker's clock ÷ a bare "
                  f"loop, alternated {ROUNDS_IN_PROCESS}×, blocks of {paired['calls_per_sample']}) "
                  f"{paired['ratio']:.3f} (quartiles {paired['quartiles'][0]:.3f}–"
                  f"{paired['quartiles'][1]:.3f})", flush=True)


if __name__ == "__main__":
    main()
