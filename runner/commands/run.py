"""`python -m runner MATRIX`: run the matrix (the pipeline's RUN steps); --dry-run prints the
plan and stops, --resume continues a run."""

from __future__ import annotations

import argparse

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


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run import pipeline

    opts = run_options(args, resume=args.resume, dry_run=args.dry_run,
                       recalibrate=args.recalibrate)
    return pipeline.execute(pipeline.RUN, pipeline.RunState(opts, console))
