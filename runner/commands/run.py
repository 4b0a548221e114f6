"""`python -m runner MATRIX`: run the matrix (the pipeline's RUN steps); --dry-run prints the
plan and stops, --resume continues a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from .options import (add_cost_options, add_dry_run_and_resume, add_matrix_options,
                      add_tuning_option, run_options)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    add_cost_options(parser)
    add_tuning_option(parser)
    parser.add_argument("--recalibrate", action="store_true",
                        help="[run] calibrate: measure the peaks again, even where this "
                             "machine's cache holds them for the same locks")
    add_dry_run_and_resume(parser)
    parser.add_argument("--blocks-from", type=Path, default=None, metavar="RUN_A",
                        help="time each cell in the block size (calls per sample) run RUN_A's "
                             "same cell used instead of calibrating one, so that `compare "
                             "RUN_A` sets like against like (a slower cell otherwise "
                             "calibrates a smaller block)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run import pipeline
    from ..run.block_sizes import HandedBlocks

    blocks = HandedBlocks.read(args.blocks_from) if args.blocks_from is not None else None
    opts = run_options(args, resume=args.resume, dry_run=args.dry_run,
                       recalibrate=args.recalibrate, blocks_from=blocks)
    return pipeline.execute(pipeline.RUN, pipeline.RunState(opts, console))
