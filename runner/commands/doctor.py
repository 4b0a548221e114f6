"""`python -m runner doctor [MATRIX]`: which path a run of the matrix would take here, and can
it (runner/studies/doctor.py); with --measure, how noisy this machine is
(runner/studies/noise.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import UsageError
from ..executors import kinds
from .options import PROFILES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", type=Path, nargs="?", default=None,
                        help="the matrix whose path to check (default: matrix.toml of the "
                             "repository)")
    parser.add_argument("--executor", choices=kinds.choices(),
                        help="check this executor instead of the matrix's")
    parser.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                        help="the Ray cluster to check (default: RAY_ADDRESS, else a local "
                             "Ray instance)")
    add_measure_options(parser)


def add_measure_options(parser: argparse.ArgumentParser) -> None:
    """doctor --measure (runner/studies/noise.py): this machine's noise, kept as its machine
    profile."""
    parser.add_argument("--measure", action="store_true",
                        help="measure this machine in the matrix's environments: the GPU's "
                             "state, the harness overhead, an A/A run's run-to-run spread and "
                             "the compare threshold it supports (results/machine-profiles/)")
    parser.add_argument("--runs", type=int, default=3, metavar="N",
                        help="--measure: A/A runs of the same cells (default 3)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="--measure: the A/A's cells (default: the first cell of each "
                             "workload)")
    parser.add_argument("--profile", choices=PROFILES,
                        help="--measure: override [run] profile")
    parser.add_argument("--detect", type=float, default=5.0, metavar="PCT",
                        help="--measure: the change (in %%) compare should see with 80 %% power: "
                             "prints the repeats a side this machine needs for it (default 5)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="--measure: the results folder whose machine-profiles/ to write "
                             "(default: results/ of the repository)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..studies import doctor
    from ..paths import REPO_ROOT

    default = REPO_ROOT / "matrix.toml"
    matrix = args.matrix or (default if default.is_file() else None)
    if args.measure:
        from ..studies import noise

        if matrix is None:
            raise UsageError("doctor --measure: name the matrix whose environments to measure")
        if not 0 < args.detect < 100:
            raise UsageError(f"--detect {args.detect}: a change in % between 0 and 100")
        return noise.measure(console, matrix, runs=args.runs, only=args.only,
                             profile=args.profile, executor=args.executor,
                             results_dir=args.results_dir, detect=args.detect / 100)
    if args.only or args.profile or args.results_dir or args.runs != 3 or args.detect != 5.0:
        raise UsageError("doctor: --only, --profile, --results-dir, --runs and --detect go "
                         "with --measure")
    return doctor.main(console, matrix, args.executor, ray_address=args.ray_address)
