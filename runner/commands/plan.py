"""`python -m runner plan MATRIX`: the plan (cells, skips, not applicable) and the setup a run
would take, nothing run or written (the run's --dry-run); --json: the same plan as one JSON
document on stdout (every cell, its state or why it is not applicable, the estimate), the
human lines on stderr."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from .options import add_cost_options, add_matrix_options, add_tuning_option, run_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    add_cost_options(parser)
    add_tuning_option(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the plan as JSON on stdout (every cell with its state, or "
                             "why it is not applicable, and the estimate), the rest on stderr")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run import pipeline

    opts = run_options(args, dry_run=True)
    if not args.json:
        return pipeline.execute(pipeline.RUN, pipeline.RunState(opts, console))
    from ..run.plan_document import plan_document

    state = pipeline.RunState(opts, Console(stderr=True, width=console.width))
    code = pipeline.execute(pipeline.RUN, state)
    if code == 0:
        sys.stdout.write(json.dumps(plan_document(state), indent=1) + "\n")
    return code
