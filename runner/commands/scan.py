"""`python -m runner scan MATRIX --channel nightly --from DATE --to DATE [--every N]`: each
dated build of the channel measured once (one run a day), into the history; then every change
point between days, the first bad day handed to the bisect where other distributions moved with
the build, and an issue-ready report of it (runner/studies/scan.py). Exit 1 when a change point
made a cell slower or a day's run had failed cells."""

from __future__ import annotations

import argparse

from rich.console import Console

from ..schema.values import CHANNELS
from .options import add_matrix_options, run_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    parser.add_argument("--channel", required=True, choices=CHANNELS,
                        help="the channel whose builds the matrix's environments that follow it "
                             "take, day by day")
    parser.add_argument("--from", dest="first", required=True, metavar="DATE",
                        help="the first day, YYYY-MM-DD")
    parser.add_argument("--to", dest="last", required=True, metavar="DATE",
                        help="the last day, YYYY-MM-DD")
    parser.add_argument("--every", type=int, default=1, metavar="N",
                        help="every N-th day only (default 1: every day)")
    parser.add_argument("--no-bisect", action="store_true",
                        help="name the first bad day but do not bisect it where other "
                             "distributions moved with the build")
    parser.add_argument("--dry-run", action="store_true",
                        help="the days that have a build, and the first day's plan; nothing run")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..studies.scan import run_scan

    return run_scan(run_options(args, dry_run=args.dry_run), console, args.channel, args.first,
                    args.last, args.every, not args.no_bisect)
