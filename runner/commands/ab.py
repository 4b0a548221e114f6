"""`python -m runner ab MATRIX [--a ENV --b ENV]`: two environments' cells in pairs (A B B A …,
fresh processes), then B ÷ A per cell with its interval and the smallest change it could have
seen, as a PR-ready Markdown table (runner/studies/ab.py). Exit 1 when a cell failed or B is
slower than A in any cell."""

from __future__ import annotations

import argparse

from rich.console import Console

from .options import add_dry_run_and_resume, add_matrix_options, run_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    parser.add_argument("--a", default=None, metavar="ENV",
                        help="side A, the control (default: the matrix's first of its two "
                             "environments)")
    parser.add_argument("--b", default=None, metavar="ENV",
                        help="side B, the change measured against A (default: the matrix's "
                             "second environment)")
    parser.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                        help="practical threshold of a verdict (default: the machine "
                             "profile's, else 0.05, as for compare)")
    add_dry_run_and_resume(parser)


def main(args: argparse.Namespace, console: Console) -> int:
    from ..errors import UsageError
    from ..studies.ab import run_ab

    if args.threshold is not None and not 0 <= args.threshold < 10:
        raise UsageError(f"--threshold must be a fraction ≥ 0 (got {args.threshold})")
    return run_ab(run_options(args, dry_run=args.dry_run, resume=args.resume), console, args.a,
                  args.b, args.threshold)
