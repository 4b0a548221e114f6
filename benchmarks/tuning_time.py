"""The tuned tier's own cost: per cell, how long its search took, how many probes, how much of a
probe is the process's fixed cost (start-up, import, compilation) against its timed window, and
what it chose (docs/tuned.md).

    .venv/bin/python benchmarks/tuning_time.py [MATRIX] [--only GLOB ...] [--budget-minutes N]
    .venv/bin/python benchmarks/tuning_time.py --from results/tuned/tuning/<stamp>

Runs `python -m runner tune MATRIX` (default examples/tuned.toml, the smoke profile on a CPU) in
a temporary results folder, or reads a finished tuning folder (--from), and prints one line per
cell. A benchmark script: it measures and prints, it asserts nothing.

What to expect on a 2-core CPU at the smoke sizes: a probe costs about what a cell's process
costs (10–40 s on Keras, 3 s on NumPy), almost all of it fixed; the timed windows are a few
percent of the search; a cell with three knob values finishes in 5 probes, a grid of 12 in
18 or the budget, whichever comes first. On a GPU the windows and compilations grow, the
start-up stays, and the default 30-minute budget is seldom spent on more than a dozen probes.

Measured on this project's 2-core CPU VM (2026-11-28, examples/tuned.toml, 18 cells, 3 minutes
a cell): 32.5 minutes of probes in all, 0.6–3.0 minutes a cell (a cell with one knob of three
values 5 probes, 0.6–2.4 min; the Keras CNN's 12-setting grids 10–17 probes; four cells spent
their budget); a probe's fixed cost 3.7–26 s (median about 14 s) against timed windows of 2–33 %
of its wall time. The measuring run of both tiers afterwards took 14.7 minutes (108 processes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def tune(matrix: Path, only: list[str], budget: float | None, results: Path) -> Path:
    command = [sys.executable, "-m", "runner", "tune", str(matrix), "--results-dir", str(results)]
    command += [arg for pattern in only for arg in ("--only", pattern)]
    if budget is not None:
        command += ["--budget-minutes", str(budget)]
    subprocess.run(command, cwd=REPO, check=True)
    (folder,) = (results / tomllib.loads(matrix.read_text())["run"]["name"] / "tuning").iterdir()
    return folder


def report(folder: Path) -> None:
    cells = tomllib.loads((folder / "tuned.toml").read_text())["cells"]
    probes_of = {}
    for path in (folder / "tuning").glob("*/probes.jsonl"):
        probes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        records = [json.loads((folder / p["record"]).read_text()) for p in probes]
        if records:
            probes_of[records[0]["cell_name"]] = (probes, records)
    print(f"{'cell':58} {'probes':>6} {'min':>6} {'budget':>6} {'fixed s/probe':>13} "
          f"{'window %':>8}  status: knobs")
    total = 0.0
    for name, entry in cells.items():
        probes, records = probes_of.get(name, ([], []))
        walls = [p["wall_s"] for p in probes]
        windows = [r.get("train_s") or 0.0 for r in records]
        fixed = (sum(walls) - sum(windows)) / len(walls) if walls else 0.0
        share = 100 * sum(windows) / sum(walls) if walls and sum(walls) else 0.0
        knobs = ", ".join(f"{k}={v}" for k, v in entry.get("knobs", {}).items()) or "defaults"
        total += entry.get("minutes", 0.0)
        print(f"{name[:58]:58} {entry.get('probes', 0):>6} {entry.get('minutes', 0):>6.2f} "
              f"{entry.get('budget_minutes') or 0:>6.1f} {fixed:>13.1f} {share:>8.1f}  "
              f"{entry['status']}: {knobs}")
    print(f"{len(cells)} cells, {total:.1f} min of probes in all ({folder})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", nargs="?", type=Path, default=REPO / "examples" / "tuned.toml")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--budget-minutes", type=float, default=None)
    parser.add_argument("--from", dest="folder", type=Path, default=None,
                        help="a finished tuning folder to read instead of tuning")
    args = parser.parse_args()
    if args.folder is not None:
        report(args.folder)
        return
    with tempfile.TemporaryDirectory() as tmp:
        report(tune(args.matrix.resolve(), args.only, args.budget_minutes, Path(tmp)))


if __name__ == "__main__":
    main()
