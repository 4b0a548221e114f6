"""What one layer cell costs, and so what `examples/layers.toml` takes on this machine.

    .venv/bin/python benchmarks/layer_cells.py [--layers Dense Conv2D LSTM ...] [--profile smoke]
    .venv/bin/python benchmarks/layer_cells.py --from results/layers/<stamp>   # a whole run

Runs `examples/layers.toml` through the runner as a user does (`python -m runner`, a fresh
process per cell), restricted with `--only` to a few layers (default: one of each kind — a dense
layer, a convolution, a recurrent layer, attention and a layer without weights — forward and
train on all seven environments), then prints per environment the median wall time of a cell
(its worker process from start to exit, as the host measured it) and how it splits — import,
set-up, warm-up (compilation), the timed window — and the whole run's elapsed time, and
extrapolates the whole example (every layer of its plan) from each environment's median. A
benchmark script: it measures and prints, it does not assert.

Measured on the 2-core CPU machine of this project (2026-11-28, smoke profile, load average 7-10
from other sessions on the same two cores, so the walls are several times a quiet machine's):
63 cells (the five default layers, forward and train, seven environments) in 1 838 s, 29.2 s a
cell; user + system CPU 11.0 min, 10.5 s a cell. Median wall a cell (import / set-up / warm-up /
timed window, s): keras-torch 19.4 (10.2 / 0.4 / 0.4 / 3.3), keras-jax 41.1 (21.4 / 10.5 / 1.7 /
1.1), keras-tensorflow 36.5 (28.3 / 0.4 / 0.5 / 0.8), keras2 36.2 (25.3 / 1.4 / 0.7 / 0.5), torch
13.2 (4.0 / 0.6 / 0.2 / 1.6), tensorflow 35.3 (27.2 / 0.2 / 0.8 / 0.5), jax 13.0 (7.6 / 0.6 /
0.9 / 0.6): the framework's import is most of a cell, its timed window about a second. Every
layer at the small shapes, forward and train on the seven environments (317 processes) came to
about 146 min of worker time at those medians — over the 20 minutes a CPU example may take, so
examples/layers.toml's smoke profile then ran ten layers (117 processes) and the full profile all.

On the quiet VM (2026-11-28, load average about 1), the whole example's smoke profile — every
layer forward on Keras 3 and the native twins, six layers' train step, five on Keras 2: 209
processes — took 12 min 3 s (`--from` its run folder: 3.4 s a cell with the host's work). Median
wall a cell: jax 1.8, torch 2.3, keras-jax 2.7, tensorflow 3.7, keras-tensorflow 3.9,
keras-torch 4.0, keras2 5.4 s, the import 0.8-3.2 s of it, the timed window 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "layers.toml"
DEFAULT_LAYERS = ("Dense", "Conv2D", "LSTM", "MultiHeadAttention", "ReLU")
PARTS = ("import_s", "setup_s", "warmup", "train_s")


def run(layers: list[str], profile: str, results: Path) -> float:
    only = [arg for layer in layers for arg in ("--only", f"*layer={layer.lower()}")]
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "runner", str(EXAMPLE), "--profile", profile,
                    "--results-dir", str(results), *only], cwd=REPO,
                   check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def cells(folder: Path) -> list[dict]:
    """The records of a run folder."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in (folder / "cells").glob("*.json")]


def elapsed_of(folder: Path) -> float:
    """A finished run's elapsed time, from its manifest's start and end."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    started, finished = (datetime.fromisoformat(manifest[k].replace("Z", "+00:00"))
                         for k in ("started_at", "finished_at"))
    return (finished - started).total_seconds()


def planned_cells(profile: str) -> dict[str, int]:
    """environment → cells of the whole example that run (not "not applicable")."""
    sys.path.insert(0, str(REPO))
    from runner.schema import matrix

    loaded = matrix.load(EXAMPLE, profile=profile)
    counts: dict[str, int] = {}
    for cell in loaded.cells:
        if not cell.not_applicable:
            counts[cell.environment] = counts.get(cell.environment, 0) + cell.repeats
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="+", default=list(DEFAULT_LAYERS))
    parser.add_argument("--profile", default="smoke", choices=("smoke", "full"))
    parser.add_argument("--from", dest="run_dir", type=Path,
                        help="read a finished run of the example (every layer) instead")
    args = parser.parse_args()
    if args.run_dir is not None:
        elapsed = elapsed_of(args.run_dir)
        records = [r for r in cells(args.run_dir)
                   if r["status"] == "ok" and r["workload"] == "layer"]
        args.layers = sorted({r["options"]["layer"] for r in records})
    else:
        with tempfile.TemporaryDirectory(prefix="layer-cells-") as scratch:
            elapsed = run(args.layers, args.profile, Path(scratch))
            (folder,) = list((Path(scratch) / "layers").iterdir())
            records = [r for r in cells(folder) if r["status"] == "ok"]
    by_env: dict[str, list[dict]] = {}
    for record in records:
        record["warmup"] = sum(record.get("warmup_s") or [])
        by_env.setdefault(record["environment"], []).append(record)
    print(f"{len(records)} cells ({', '.join(args.layers)}) in {elapsed:.0f} s: "
          f"{elapsed / max(len(records), 1):.1f} s a cell, the host's work included")
    print(f"{'environment':<18}{'cells':>6}{'wall s':>9}" + "".join(f"{p:>10}" for p in PARTS))
    medians = {}
    for env, found in by_env.items():
        medians[env] = statistics.median(r["wall_s"] for r in found)
        parts = [statistics.median(r.get(p) or 0.0 for r in found) for p in PARTS]
        print(f"{env:<18}{len(found):>6}{medians[env]:>9.1f}" + "".join(f"{v:>10.1f}" for v in parts))
    planned = planned_cells(args.profile)
    total = sum(count * medians.get(env, statistics.median(medians.values()))
                for env, count in planned.items())
    print(f"examples/layers.toml ({args.profile}): {sum(planned.values())} processes, about "
          f"{total / 60:.0f} min of worker time at these medians "
          f"(× {elapsed / max(sum(r['wall_s'] for r in records), 1e-9):.2f} for the host's share)")


if __name__ == "__main__":
    main()
