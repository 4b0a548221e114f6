"""`python -m runner plan MATRIX`: the plan (cells, skips, not applicable) and the setup a run
would take, nothing run or written (the run's --dry-run)."""

from __future__ import annotations

import argparse

from rich.console import Console

from .options import add_cost_options, add_matrix_options, add_tuning_option, run_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    add_cost_options(parser)
    add_tuning_option(parser)


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run import pipeline

    opts = run_options(args, dry_run=True)
    return pipeline.execute(pipeline.RUN, pipeline.RunState(opts, console))
