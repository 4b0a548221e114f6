"""`python -m runner tune MATRIX`: the tuned tier's search (runner/studies/tuning.py,
docs/tuned.md): for every cell at tier = "tuned", the knobs its API declares, probed within the
same budget for every environment; the chosen knobs in a tuning folder's tuned.toml, which a run
of the matrix reads."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..executors import kinds
from .options import PROFILES, parallel, positive


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", type=Path, help="matrix file (TOML)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="tune only the cells whose (defaults) name contains or globs "
                             "PATTERN (repeatable)")
    parser.add_argument("--profile", choices=PROFILES,
                        help="override [run] profile (auto: smoke when no GPU is found)")
    parser.add_argument("--executor", choices=kinds.choices(), help="override [run] executor")
    parser.add_argument("--parallel", type=parallel, metavar="N|auto", help=argparse.SUPPRESS)
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="folder for run and tuning folders (default: results/ of the "
                             "repository)")
    parser.add_argument("--budget-minutes", type=positive, default=None, metavar="N",
                        help="wall minutes of probes per cell, start-up and compilation "
                             "included (default: [tuning] budget_minutes, else 30 on a GPU, 3 "
                             "on a CPU)")
    parser.add_argument("--resume", nargs="?", const=True, default=None, type=Path,
                        metavar="DIR", help="continue a tuning (default: the matrix's newest): "
                                            "probes it holds are read back, not run again")
    parser.add_argument("--dry-run", action="store_true",
                        help="show each cell's knobs and the budget, and stop")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run.state import Options, RunState
    from ..studies.tuning import Tuner, tune

    opts = Options(matrix_path=args.matrix, only=args.only, profile=args.profile,
                   executor=args.executor, parallel=1, history=False)
    if args.results_dir is not None:
        opts.results_dir = args.results_dir
    tuner = Tuner(budget_minutes=args.budget_minutes, resume=args.resume)
    state = RunState(opts, console)
    with state.cleanup:
        return tune(state, tuner, args.dry_run)
