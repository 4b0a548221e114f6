"""`python -m runner report RUN_DIR`: rebuild the merged outputs of a run from its cell
records; `--issue`: an issue-ready regression report of two of its environments (issue.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import EXIT_OK, UsageError, user_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a run folder under results/")
    parser.add_argument("--issue", action="store_true",
                        help="write issue.md: the treatment against the control, everything an "
                             "upstream tracker asks (builds, stack diff, figures with intervals, "
                             "machine, same answer, profiles, how to reproduce), nothing of this "
                             "machine")
    parser.add_argument("--control", default=None, metavar="ENV",
                        help="--issue: the control environment (default: the run's report "
                             "baseline, an A/B run's A)")
    parser.add_argument("--treatment", default=None, metavar="ENV",
                        help="--issue: the treatment environment (default: the one other "
                             "environment)")
    parser.add_argument("--control-run", type=Path, default=None, metavar="RUN_DIR",
                        help="--issue: the control's run folder when it is another run (a day "
                             "before, a release run)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run.console import show_results
    from ..results.analysis.report_model import analyse_run
    from ..results.data.store import Store
    from ..results.render.write import write_reports

    if args.issue:
        return write_the_issue(args, console)
    store = Store.open(args.run_dir, lock=False)
    manifest = store.read_manifest()
    report = write_reports(store, analyse_run(store, manifest))
    show_results(report, f"{manifest.get('name')} ({store.root})", store.root, console)
    return EXIT_OK


def write_the_issue(args: argparse.Namespace, console: Console) -> int:
    from ..results.data.store import open_run
    from ..results.render.issue import issue_from_runs

    _, manifest = open_run(args.run_dir)
    control_dir = args.control_run or args.run_dir
    names = list(manifest.get("environments") or {})
    baseline = (manifest.get("report") or {}).get("baseline_environment")
    control = args.control or (baseline if args.control_run is None else None)
    treatment = args.treatment
    if args.control_run is not None and (control is None or treatment is None):
        treatment = treatment or control or (names[0] if len(names) == 1 else None)
        control = control or treatment
    if control is not None and treatment is None:
        others = [n for n in names if n != control]
        treatment = others[0] if len(others) == 1 else None
    if control is None or treatment is None:
        raise UsageError(f"{args.run_dir}: report --issue needs --control ENV --treatment ENV "
                         f"(its environments: {', '.join(names) or 'none'})")
    path = issue_from_runs((control_dir, control), (args.run_dir, treatment))
    console.print(f"issue: {user_text(str(path))}", soft_wrap=True, highlight=False)
    return EXIT_OK
