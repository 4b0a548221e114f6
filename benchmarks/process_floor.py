"""The per-process floor: what one worker process costs beyond its timed window, per environment,
and how much of it is the runner's own rather than the framework's.

    .venv/bin/python benchmarks/process_floor.py [--repeats 3] [--environments numpy torch ...]
                                                 [--runner-root DIR] [--json OUT]
                                                 [--without-bytecode ENVIRONMENT ...]
                                                 [--without-bytecode ENVIRONMENT ...]

For each environment of matrix.toml, the runner (`python -m runner`, as a user starts it;
`--runner-root` runs another checkout's runner, e.g. main's, for a before/after) measures its
cheapest cell once per round, `--repeats` rounds, each a fresh worker process: a tiny matmul
(Keras 2: a tiny Dense layer's forward pass; hf: a tiny BERT's predict). From each record:

- fixed: the process's wall time (the host's clock around it) minus its timed window: what the
  report's "Fixed cost" column shows;
- the framework's part: its import (`import_s`), building the model and data (`setup_s`) and
  the warm-up calls (compilation included);
- the runner's part: the rest, in two places: outside the worker's main (interpreter start, the
  runner's worker modules imported, the process's exit after its result is written, the
  supervisor around it) = wall − worker_s, and inside it (metadata, telemetry at the window's two
  ends, block calibration, the answer, the environment's distributions, writing the result)
  = worker_s − import − setup − warm-up − timed.

Beside it, the framework's own floor in the same environment: a bare process that imports the
framework and exits (`python -c "import torch"`, with the worker's variables:
PYTHONDONTWRITEBYTECODE=1 and the rest), timed from outside, once per round; and how much of
the environment's site-packages has its bytecode (.pyc for this interpreter): without it every
process compiles the framework's Python source again at import. Rounds alternate the runner's
run and the bare processes (ABBA), so a shared machine's drift hits both alike; medians over the
rounds, with the load average before and after, since the neighbours move every figure.

`--without-bytecode ENV ...` hides those environments' bytecode from their processes (the
worker's and the bare one: an empty PYTHONPYCACHEPREFIX, where Python finds none and, with
PYTHONDONTWRITEBYTECODE, writes none), as the environments uv built before the runner compiled
them were: so the before of that change is measured on the same machine and environments. A
benchmark script: it measures and prints, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.environments import venvs  # noqa: E402

# The cheapest cell of each API: what its process costs beyond the framework is the question.
CHEAPEST = {
    "tf-keras": {"workload": "layer", "task": "forward", "batch_size": 8,
                 "options": {"layer": "Dense"}},
    "hf": {"workload": "bert", "task": "predict", "batch_size": 1},
}
MATMUL = {"workload": "matmul"}
# What a bare process of each API imports (the framework alone, as the worker's API module does).
IMPORTS = {"numpy": "import numpy", "torch": "import torch", "jax": "import jax",
           "tensorflow": "import tensorflow", "tf-keras": "import tensorflow",
           "hf": "import torch, transformers", "keras": "import keras"}
WORKER_VARIABLES = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
                    "PYTHONSAFEPATH": "1", "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu",
                    "TF_CPP_MIN_LOG_LEVEL": "1"}


def environments(names: list[str] | None) -> dict[str, dict]:
    declared = tomllib.loads((REPO / "matrix.toml").read_text(encoding="utf-8"))["environments"]
    return {k: v for k, v in declared.items() if names is None or k in names}


def matrix(envs: dict[str, dict], repeats: int, hidden: dict[str, str]) -> str:
    lines = ["[run]", 'name = "floor"', f"repeats = {repeats}", "warmup_steps = 1",
             'profile = "full"', "calibrate = false", "preallocate = false", ""]
    for name, table in envs.items():
        lines.append(f"[environments.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
        if name in hidden:
            lines += ["unsafe_env = true", "env = { PYTHONPYCACHEPREFIX = "
                      f"{json.dumps(hidden[name])} }}"]
        lines.append("")
    for name, table in envs.items():
        cell = {**CHEAPEST.get(table["api"], MATMUL), "environments": [name], "size": "tiny"}
        options = cell.pop("options", None)
        lines.append("[[benchmarks]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in cell.items()]
        if options:
            lines.append("options = { " + ", ".join(f"{k} = {json.dumps(v)}"
                                                     for k, v in options.items()) + " }")
        lines.append("")
    return "\n".join(lines)


def run_records(envs: dict[str, dict], repeats: int, runner_root: Path,
                hidden: dict[str, str]) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="process-floor-") as scratch:
        path = Path(scratch) / "floor.toml"
        path.write_text(matrix(envs, repeats, hidden), encoding="utf-8")
        results = Path(scratch) / "results"
        env = {**os.environ, "PYTHONPATH": str(runner_root), "COLUMNS": "200"}
        done = subprocess.run([sys.executable, "-m", "runner", str(path), "--results-dir",
                               str(results), "--executor", "local"], cwd=runner_root, env=env,
                              capture_output=True, text=True)
        if done.returncode not in (0, 1):
            raise SystemExit(f"the runner exited {done.returncode}:\n{done.stderr[-2000:]}")
        (run,) = (results / "floor").iterdir()      # a fresh folder per call
        return [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]


def interpreter(table: dict) -> Path:
    return venvs.env_for(table["image"]).python


def bare_import_s(table: dict, prefix: str | None) -> float:
    """One process that imports the framework and exits, timed from outside."""
    env = {**os.environ, **WORKER_VARIABLES}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = prefix
    if table.get("backend"):
        env["KERAS_BACKEND"] = table["backend"]
    if table["api"] == "tf-keras":
        env["TF_USE_LEGACY_KERAS"] = "1"
    started = time.perf_counter()
    subprocess.run([str(interpreter(table)), "-c", IMPORTS[table["api"]]], env=env, check=True,
                   capture_output=True, cwd=tempfile.gettempdir())
    return time.perf_counter() - started


def bytecode_share(table: dict) -> float | None:
    """The share of site-packages' modules with bytecode for the environment's interpreter."""
    python = interpreter(table)
    tag = subprocess.run([str(python), "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    site = next(python.parent.parent.glob("lib/python*/site-packages"), None)
    if site is None:
        return None
    sources = compiled = 0
    for folder, _, files in os.walk(site):
        if os.path.basename(folder) == "__pycache__":
            compiled += sum(f.endswith(f".{tag}.pyc") for f in files)
        else:
            sources += sum(f.endswith(".py") for f in files)
    return compiled / sources if sources else None


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def floor_of(records: list[dict]) -> dict[str, float | None]:
    ok = [r for r in records if r["status"] == "ok"]
    warm = [sum(r["warmup_s"]) for r in ok]
    return {
        "fixed_s": median([r["wall_s"] - r["train_s"] for r in ok]),
        "import_s": median([r["import_s"] for r in ok]),
        "setup_s": median([r["setup_s"] for r in ok]),
        "warmup_s": median(warm),
        "outside_main_s": median([r["wall_s"] - r["worker_s"] for r in ok]),
        "inside_other_s": median([r["worker_s"] - r["import_s"] - r["setup_s"] - w - r["train_s"]
                                  for r, w in zip(ok, warm, strict=True)]),
        "runner_s": median([r["wall_s"] - r["import_s"] - r["setup_s"] - w - r["train_s"]
                            for r, w in zip(ok, warm, strict=True)]),
        "processes": len(ok),
    }


def show(value: float | None, unit: str = " s") -> str:
    return "–" if value is None else f"{value:.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--environments", nargs="+", help="names in matrix.toml (default: all)")
    parser.add_argument("--runner-root", type=Path, default=REPO)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--without-bytecode", nargs="+", default=[], metavar="ENVIRONMENT",
                        help="hide these environments' bytecode from their processes")
    args = parser.parse_args()
    envs = environments(args.environments)
    empty = Path(tempfile.mkdtemp(prefix="no-bytecode-"))
    hidden = {name: str(empty) for name in args.without_bytecode}
    print(f"runner: {args.runner_root}; load average {os.getloadavg()[0]:.1f}", flush=True)
    records: list[dict] = []
    bare: dict[str, list[float]] = {name: [] for name in envs}
    for round_ in range(1, args.repeats + 1):
        # ABBA: the runner first in odd rounds, the bare processes first in even ones.
        for part in ("runner", "bare") if round_ % 2 else ("bare", "runner"):
            if part == "runner":
                records += run_records(envs, 1, args.runner_root.resolve(), hidden)
            else:
                for name, table in envs.items():
                    bare[name].append(bare_import_s(table, hidden.get(name)))
        print(f"round {round_} done; load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for name, table in envs.items():
        row = {"environment": name, **floor_of([r for r in records if r["environment"] == name]),
               "bare_import_process_s": median(bare[name]),
               "bytecode": 0.0 if name in hidden else bytecode_share(table)}
        rows.append(row)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"{'environment':18} {'bytecode':>8} {'bare import':>11} {'fixed':>8} {'import':>8} "
          f"{'setup':>7} {'warm-up':>8} {'runner':>8} {'outside':>8} {'inside':>8}")
    for row in rows:
        share = "–" if row["bytecode"] is None else f"{row['bytecode']:.0%}"
        print(f"{row['environment']:18} {share:>8} {show(row['bare_import_process_s']):>11} "
              f"{show(row['fixed_s']):>8} {show(row['import_s']):>8} {show(row['setup_s']):>7} "
              f"{show(row['warmup_s']):>8} {show(row['runner_s']):>8} "
              f"{show(row['outside_main_s']):>8} {show(row['inside_other_s']):>8}")
    print("fixed = wall − timed window; runner = fixed − import − setup − warm-up = outside "
          "(wall − worker_s: interpreter start, worker imports, exit) + inside (telemetry, "
          "blocks, metadata, answer, distributions, writing)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
