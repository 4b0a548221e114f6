"""`python -m runner compare RUN_A RUN_B`: judge run B against run A, cell by cell (exit 1 when
a cell is slower)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", type=Path, help="baseline run folder (A)")
    parser.add_argument("run_b", type=Path, help="run folder to judge against A (B)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="practical threshold on the ratio of medians (default: from the "
                             "runs' machine profiles when both have one, else 0.05)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="significance level of the test on repeat medians (default 0.05)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                        help="write the Markdown here (default: RUN_B/compare-<A>.md)")
    parser.add_argument("--environments", nargs=2, default=None, metavar=("ENV_A", "ENV_B"),
                        help="compare environment ENV_A of RUN_A with ENV_B of RUN_B (the same "
                             "run may be given twice: two stacks measured side by side)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..results.render.compare import run_compare

    environments = tuple(args.environments) if args.environments else None
    return run_compare(args.run_a, args.run_b, args.threshold, args.alpha, args.markdown,
                       console, environments)
