"""`python -m runner profile RUN_DIR [--cell GLOB]`: a profiled pass of cells of a finished run,
in the run's own environments, written into the run folder (profiles/) and its report; and
`python -m runner profile diff`: two profiles side by side — two cells of one run (`--env A
--vs B`), or the same cell in two runs (a stack change). Across profilers (torch against JAX)
only categories compare; the output says so."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_OK, UsageError, one_line, user_text
from ..executors import kinds
from .options import pattern

ACTIONS = ("cells", "diff")


def at_least_0(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {text!r}")
    return int(text)


def implied_action(argv: list[str]) -> list[str]:
    """`profile RUN_DIR …` is `profile cells RUN_DIR …`."""
    if argv and argv[0] not in (*ACTIONS, "-h", "--help"):
        return ["cells", *argv]
    return argv


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                parser_class=type(parser))
    cells = sub.add_parser("cells", help="profile cells of a finished run (the default: "
                                         "`profile RUN_DIR`)")
    cells.add_argument("run_dir", type=Path, help="a run folder")
    cells.add_argument("--cell", action="append", default=[], metavar="GLOB", type=pattern,
                       help="the cells to profile: a name, glob or id (repeatable; default: "
                            "every cell with a finished repeat)")
    cells.add_argument("--executor", choices=kinds.choices(), help="override the run's [run] executor")
    diff = sub.add_parser("diff", help="two profiles side by side: categories, then the ops "
                                       "that moved most")
    diff.add_argument("run_a", type=Path, metavar="RUN_DIR", help="a run folder (A)")
    diff.add_argument("run_b", type=Path, nargs="?", metavar="RUN_B",
                      help="a second run folder: the same cell in both (B)")
    diff.add_argument("--env", metavar="ENV_A", help="one run: the environment of A")
    diff.add_argument("--vs", metavar="ENV_B", help="one run: the environment of B")
    diff.add_argument("--row", metavar="TEXT", help="the row (its label contains TEXT), where "
                                                    "several rows have both environments")
    diff.add_argument("--cell", metavar="GLOB", default="*",
                      help="two runs: the cells compared (default: every cell profiled in both)")
    diff.add_argument("--top", type=at_least_0, default=20, metavar="N",
                      help="ops shown (default 20; 0: the categories only)")
    diff.add_argument("--markdown", type=Path, metavar="FILE", help="also write it as Markdown")


def main(args: argparse.Namespace, console: Console) -> int:
    if args.action == "cells":
        return profile_run(args, console)
    return diff_command(args, console)


def profile_run(args: argparse.Namespace, console: Console) -> int:
    from ..results.analysis.report_model import analyse_run
    from ..results.render.write import write_reports
    from ..run import pipeline, profiles

    run_dir = args.run_dir.expanduser().resolve()
    if not (run_dir / "manifest.json").is_file():
        raise UsageError(f"{run_dir}: not a run folder (no manifest.json)")
    opts = pipeline.Options(matrix_path=run_dir / "matrix.toml", resume=run_dir,
                            executor=args.executor, profile_cells=args.cell or ["*"],
                            results_dir=run_dir.parent.parent, history=False)
    state = pipeline.RunState(opts, console)

    def report(state: pipeline.RunState) -> int:
        state.setup.close()
        summaries = write_reports(state.store, analyse_run(state.store)).summaries
        console.print(f"report: {user_text(str(state.store.root / 'report.md'))} "
                      f"({len(summaries)} cells)", soft_wrap=True)
        return EXIT_OK

    def open_run(state: pipeline.RunState) -> None:
        """The run's folder, locked; made by this runner version (its cell ids are this one's)."""
        from ..results.data.store import Store
        from ..run.resume import check_resumable

        store = Store.open(run_dir)
        state.cleanup.callback(store.close)
        check_resumable(store, action="profile")
        state.progress.store = store

    return pipeline.execute((pipeline.load_matrix, open_run, pipeline.plan_cells,
                             lambda state: profiles.refuse_unmatched(state, "--cell"),
                             profiles.step, report), state)


def diff_command(args: argparse.Namespace, console: Console) -> int:
    from ..results.analysis import profiles as analysis

    pairs = pairs_of(args)
    lines: list[str] = []
    for a, b in pairs:
        result = analysis.diff(a, b, top=args.top)
        show_diff(a, b, result, console)
        if args.top == 0 and result["op_level"]:
            console.print("ops: none shown (--top 0)")
        lines += diff_markdown(a, b, result)
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
        console.print(f"written: {user_text(str(args.markdown))}", soft_wrap=True)
    return EXIT_OK


def _profiles(run_dir: Path) -> list[dict[str, Any]]:
    from ..results.data.ledger import Ledger
    from ..results.data.profiles import read_profiles

    if not (run_dir / "manifest.json").is_file():
        raise UsageError(f"{run_dir}: not a run folder (no manifest.json)")
    found, problems = read_profiles(run_dir, Ledger(run_dir))
    for problem in problems:                # named, as report names them, and left out
        print(f"warning: {one_line(problem)}; not compared", file=sys.stderr)
    found = [p for p in found if p.get("status") == "ok" and p.get("kernels")]
    if not found:
        raise UsageError(f"{run_dir}: no finished profile (make some with `python -m runner "
                         f"profile {run_dir}`)")
    return found


def pairs_of(args: argparse.Namespace) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (A, B) profiles the arguments name."""
    first = _profiles(args.run_a)
    if args.run_b is not None:
        second = {p["cell_name"]: p for p in _profiles(args.run_b)}
        pairs = [(p, second[p["cell_name"]]) for p in first if p["cell_name"] in second
                 and fnmatch.fnmatch(p["cell_name"], args.cell)]
        if not pairs:
            raise UsageError(f"no cell matching {args.cell!r} is profiled in both {args.run_a} "
                             f"and {args.run_b}")
        return pairs
    if not args.env or not args.vs:
        raise UsageError("profile diff RUN_DIR: name the two cells with --env ENV_A --vs ENV_B "
                         "(or give two run folders)")
    rows: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for profile in first:
        if args.row is None or args.row in str(profile.get("row")):
            rows.setdefault((profile["row"], profile["batch_size"]), {})[
                profile["environment"]] = profile
    both = [(row, envs) for row, envs in rows.items() if args.env in envs and args.vs in envs]
    if not both:
        known = sorted({p["environment"] for p in first})
        raise UsageError(f"{args.run_a}: no row has profiles of both {args.env!r} and "
                         f"{args.vs!r} (profiled: {', '.join(known)})")
    if len(both) > 1:
        names = "; ".join(f"{label}, batch {batch}" for (label, batch), _ in both)
        raise UsageError(f"several rows have both ({names}): name one with --row")
    envs = both[0][1]
    return [(envs[args.env], envs[args.vs])]


def _title(a: dict[str, Any], b: dict[str, Any], result: dict[str, Any]) -> str:
    level = ("op by op (the same profiler)" if result["op_level"] else
             f"by category only: other profilers ({(a['kernels'] or {}).get('source')} and "
             f"{(b['kernels'] or {}).get('source')}) name other code")
    return f"B {b['cell_name']} against A {a['cell_name']}: ms per step, {level}"


def show_diff(a: dict[str, Any], b: dict[str, Any], result: dict[str, Any],
              console: Console) -> None:
    table = Table(title=user_text(_title(a, b, result)), title_justify="left")
    for head in ("category", "A ms/step", "B ms/step", "Δ ms/step"):
        table.add_column(head, justify="left" if head == "category" else "right")
    for category, ms_a, ms_b, delta in result["categories"]:
        table.add_row(category, f"{ms_a:.4g}", f"{ms_b:.4g}", f"{delta:+.4g}")
    console.print(table)
    if result["ops"]:
        ops = Table(title="the ops that moved most (calls per step: + more in B, - fewer, "
                          "= as many)", title_justify="left")
        for head in ("op", "category", "A ms", "B ms", "Δ ms", "calls A → B", ""):
            ops.add_column(head, justify="left" if head in ("op", "category", "") else "right",
                           overflow="fold")
        for op in result["ops"]:
            ops.add_row(user_text(op["name"][:90]), op["category"], f"{op['a_ms']:.4g}",
                        f"{op['b_ms']:.4g}", f"{op['delta_ms']:+.4g}",
                        f"{_calls(op['a_calls'])} → {_calls(op['b_calls'])}", op["mark"])
        console.print(ops)


def _calls(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def diff_markdown(a: dict[str, Any], b: dict[str, Any], result: dict[str, Any]) -> list[str]:
    from ..results.formatting import md_text
    from ..results.render.markdown_profiles import code

    out = [f"## {md_text(_title(a, b, result))}", "", "| category | A ms/step | B ms/step | Δ ms/step |",
           "|---|---:|---:|---:|"]
    out += [f"| {c} | {x:.4g} | {y:.4g} | {d:+.4g} |" for c, x, y, d in result["categories"]]
    if result["ops"]:
        out += ["", "| op | category | A ms | B ms | Δ ms | calls A → B | |",
                "|---|---|---:|---:|---:|---:|---|"]
        out += [f"| {code(o['name'])} | {o['category']} | {o['a_ms']:.4g} | {o['b_ms']:.4g} | "
                f"{o['delta_ms']:+.4g} | {_calls(o['a_calls'])} → {_calls(o['b_calls'])} | "
                f"{o['mark']} |" for o in result["ops"]]
    return out + [""]
