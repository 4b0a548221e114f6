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
    parser.add_argument("--fail-on-regression", type=_percent, default=None, metavar="PERCENT",
                        help="a CI gate (docs/layers.md): print the cells slower by more than "
                             "PERCENT (e.g. 10%%) beyond their run-to-run spread and Welch's "
                             "test as a Markdown table, exit 1 if there is one, else 0 (2 when "
                             "no cell compares)")


def _percent(text: str) -> float:
    from ..results.render.regressions import parse_percent

    try:
        return parse_percent(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a percent, e.g. 10%") from None


def main(args: argparse.Namespace, console: Console) -> int:
    from ..results.render.compare import run_compare

    environments = tuple(args.environments) if args.environments else None
    if args.fail_on_regression is not None:
        from ..errors import UsageError
        from ..results.render.regressions import run_gate

        if args.threshold is not None:
            raise UsageError("compare: --fail-on-regression PERCENT is the gate's threshold; "
                             "give it or --threshold, not both")

        return run_gate(args.run_a, args.run_b, args.fail_on_regression, args.alpha, console,
                        args.markdown, environments)
    return run_compare(args.run_a, args.run_b, args.threshold, args.alpha, args.markdown,
                       console, environments)
