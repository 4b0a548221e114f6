"""`python -m runner bisect RUN_GOOD RUN_BAD --cell ID`: which changed distribution moved the
cell (runner/studies/bisect.py). Exit 1 when no distribution could be named."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_good", type=Path, metavar="RUN_GOOD", help="run folder: the good stack")
    parser.add_argument("run_bad", type=Path, metavar="RUN_BAD", help="run folder: the bad stack")
    parser.add_argument("--cell", required=True, metavar="ID",
                        help="the cell (id or name) whose number moved")
    parser.add_argument("--good-cell", default=None, metavar="ID",
                        help="the good end's cell (id or name) in RUN_GOOD when it is another "
                             "environment's, e.g. two stacks of one run side by side (default: "
                             "the cell of the same name)")
    parser.add_argument("--repeats", type=int, default=None, metavar="N",
                        help="repeats per measured stack (default: the bad run's, at least 3)")
    parser.add_argument("--work-dir", type=Path, default=None, metavar="DIR",
                        help="where intermediate locks, environments and runs go (default: "
                             "results/bisect/<cell>-<time>)")
    parser.add_argument("--find-links", action="append", default=[], type=Path, metavar="DIR",
                        help="a folder of wheels uv may use besides PyPI (repeatable; e.g. a "
                             "local torch+cpu wheel)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="history the steps are written to (default as for history)")
    parser.add_argument("--issue", action="store_true",
                        help="then write issue.md into RUN_BAD: the bad stack against the good "
                             "one, with what the bisect named (as report --issue)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..studies.bisect import Bisect
    from .history import opened_history

    with opened_history(args.db) as engine:
        found = Bisect(engine, args.run_good, args.run_bad, args.cell, args.repeats,
                       args.work_dir, args.find_links, console, args.good_cell)
        code = found.run()
        if args.issue:
            from ..errors import user_text
            from ..history.queries import bisect_conclusion
            from ..results.render.issue import issue_from_runs

            said = bisect_conclusion(engine, found.pk) or "no conclusion"
            path = issue_from_runs((args.run_good, found.good_environment),
                                   (args.run_bad, found.environment),
                                   [f"Bisect over distributions ({found.cell_name}): {said}."])
            console.print(f"issue: {user_text(str(path))}", soft_wrap=True, highlight=False)
        return code
