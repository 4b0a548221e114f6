"""`python -m runner reproduce RUN_DIR`: a finished run again, in exactly its environments, then
compared with the original (runner/studies/reproduce.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a finished run folder under results/")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="folder for the new run folder (default: results/ of the "
                             "repository)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..studies.reproduce import reproduce

    return reproduce(args.run_dir, args.results_dir, console)
