"""`python -m runner history import|list|show|diff|regressions|site`: the results database
(runner/history/).

Exit codes: 0 done; 1 `regressions` found a new change point that made a cell slower; 2 bad
input or an unreachable database."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, one_line, user_text
from ..history import changepoints



def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                parser_class=type(parser))
    add = {name: sub.add_parser(name, help=text) for name, text in (
        ("import", "store run folders (a run folder, or every run under a results folder)"),
        ("list", "the stored runs"),
        ("show", "a cell's series across runs: date, median, interval, stack changes"),
        ("diff", "what changed between two runs' stacks, environment by environment"),
        ("regressions", "change points in every cell's series; exit 1 on a new slowdown"),
        ("site", "a static trend site (opens offline)"))}
    for action in add.values():
        action.add_argument("--db", metavar="URL", default=None,
                            help="SQLAlchemy URL of the history (default: DL_BENCH_HISTORY_URL, "
                                 "else sqlite:///results/history.sqlite)")
    add["import"].add_argument("paths", type=Path, nargs="+", metavar="RESULTS_DIR|RUN_DIR")
    for key in ("name", "host", "gpu"):
        add["list"].add_argument(f"--{key}", metavar="GLOB", default=None,
                                 help=f"only runs whose {key} matches GLOB")
    add["list"].add_argument("--since", metavar="DATE", default=None, help="YYYY-MM-DD[THH:MM:SSZ]")
    add["list"].add_argument("--until", metavar="DATE", default=None, help="YYYY-MM-DD[THH:MM:SSZ]")
    add["show"].add_argument("cell", metavar="CELL", help="a cell name, a cell id or a glob")
    add["diff"].add_argument("run_a", metavar="RUN_A", help="run id (name/timestamp) or folder")
    add["diff"].add_argument("run_b", metavar="RUN_B")
    add["diff"].add_argument("--environments", nargs=2, default=None, metavar=("ENV_A", "ENV_B"),
                             help="environment ENV_A of RUN_A against ENV_B of RUN_B (the same "
                                  "run may be given twice: two stacks side by side)")
    add["regressions"].add_argument("--cell", metavar="GLOB", default="*",
                                    help="only cells whose name matches GLOB")
    add["regressions"].add_argument("--recent", type=int, default=changepoints.RECENT,
                                    metavar="N", help="a change point within the newest N runs "
                                    f"of its series is new (default {changepoints.RECENT})")
    add["regressions"].add_argument("--min-change", type=float,
                                    default=changepoints.MIN_MAGNITUDE, metavar="FRACTION",
                                    help="smallest level shift reported (default "
                                         f"{changepoints.MIN_MAGNITUDE})")
    add["regressions"].add_argument("--max-pvalue", type=float,
                                    default=changepoints.MAX_PVALUE, metavar="P",
                                    help=f"significance (default {changepoints.MAX_PVALUE})")
    add["regressions"].add_argument("--issue", action="store_true",
                                    help="write issue.md into the run folder of each new "
                                         "slowdown: that run against the run before it")
    add["site"].add_argument("-o", "--output", type=Path, required=True, metavar="DIR")


def main(args: argparse.Namespace, console: Console) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from ..history import db

    with opened_history(args.db, create=args.action == "import") as engine:
        try:
            return ACTIONS[args.action](engine, args, console)
        except SQLAlchemyError as exc:      # a damaged file whose schema still read
            raise UsageError(f"history database {db.shown(db.resolve_url(args.db))}: "
                             f"{db.one_line(exc)}") from None


@contextlib.contextmanager
def opened_history(url: str | None, create: bool = True) -> Iterator[Any]:
    """The history database (upgraded; created only where `create`: `import` writes, every
    other action reads); UsageError when it cannot be opened."""
    from ..history import db

    try:
        engine = db.open_history(db.resolve_url(url), create)
    except db.HistoryError as exc:
        raise UsageError(str(exc)) from None
    try:
        yield engine
    finally:
        engine.dispose()


def do_import(engine, args, console) -> int:
    from ..history import ingest

    folders = []
    for path in args.paths:
        if not path.is_dir():
            raise UsageError(f"{path}: no such folder")
        found = ingest.run_folders(path)
        if not found:
            raise UsageError(f"{path}: no run folder (manifest.json and cells/) in it")
        folders += found
    counts = {"added": 0, "updated": 0, "unchanged": 0}
    for folder in folders:
        done = ingest.import_run(engine, folder)
        for warning in done.warnings:
            print(f"warning: {one_line(warning)}", file=sys.stderr)
        counts[done.action] += 1
        cells = f" ({done.cells} cells)" if done.action != "unchanged" else ""
        console.print(f"{done.action:9} {user_text(done.run_id)}{cells}", soft_wrap=True)
    console.print(", ".join(f"{n} {k}" for k, n in counts.items()), soft_wrap=True)
    return EXIT_OK


def _fmt(value, pattern: str = ".4g") -> str:
    return "–" if value is None else format(value, pattern)


def do_list(engine, args, console) -> int:
    from ..history.queries import list_runs

    rows = list_runs(engine, args.name, args.host, args.gpu, args.since, args.until)
    table = Table(title=f"{len(rows)} runs", title_justify="left")
    for column in ("run", "started", "host", "GPU", "driver", "runner", "cells ok"):
        table.add_column(column, no_wrap=column != "run", overflow="fold")
    for row in rows:
        table.add_row(user_text(row["run_id"]), row["started_at"] or "–",
                      row["host_name"] or "–", row["gpu_name"] or "–", row["driver_version"] or "–",
                      row["runner_version"] or "–", f"{row['ok'] or 0}/{row['cells'] or 0}")
    console.print(table)
    return EXIT_OK


def do_show(engine, args, console) -> int:
    from ..history.queries import resolve_cell, series

    name = resolve_cell(engine, args.cell)
    points, previous = series(engine, name), None
    table = Table(title=f"{name}: {points[0].label}, batch {points[0].batch_size}",
                  title_justify="left")
    generate = any(point.ttft_ms is not None for point in points)
    priced = any(point.usd_per_1k_items is not None for point in points)
    for column in ("run", "started", "ms", "95 % interval",
                   *(("first token ms", "decode ms/token") if generate else ()),
                   *(("$ per 1k items (list price)",) if priced else ()), "repeats", "stack"):
        table.add_column(column, overflow="fold", no_wrap=column in ("ms",))
    for point in points:
        median = _fmt(point.time_ms) if point.status == "ok" else point.status
        interval = (f"{_fmt(point.ci_low_ms)}–{_fmt(point.ci_high_ms)}"
                    if point.ci_low_ms is not None else "–")
        stack = "first" if point.change is None else user_text(point.change.text())
        first = (_fmt(point.ttft_ms), _fmt(point.decode_ms_per_token)) if generate else ()
        price = (price_text(point, previous),) if priced else ()
        table.add_row(user_text(point.run_id), point.started_at or "–", median, interval, *first,
                      *price, str(len(point.repeat_medians_ms)), stack)
        previous = point
    console.print(table)
    return EXIT_OK


def price_text(point, previous) -> str:
    """A point's cost per 1,000 items, and against the point before in time and price."""
    from ..results.analysis.cost import versus
    from ..results.formatting import usd

    if point.usd_per_1k_items is None:
        return "–"
    text = usd(point.usd_per_1k_items)
    if previous is not None and previous.usd_per_1k_items and previous.time_ms \
            and point.time_ms:
        time_ratio = point.time_ms / previous.time_ms
        said = versus(time_ratio, point.usd_per_1k_items / previous.usd_per_1k_items / time_ratio)
        text += f": {said} than before" if said else ""
    return text


def do_diff(engine, args, console) -> int:
    from ..history.queries import diff_runs

    a, b, diffs = diff_runs(engine, args.run_a, args.run_b,
                            tuple(args.environments) if args.environments else None)
    console.print(f"A = {user_text(a['run_id'])} ({a['started_at']})\nB = {user_text(b['run_id'])} "
                  f"({b['started_at']})", soft_wrap=True)
    for key in ("driver_version", "gpu_name", "runner_version", "host_name"):
        if a.get(key) != b.get(key):
            console.print(f"run: {key} {a.get(key) or 'absent'} → {b.get(key) or 'absent'}",
                          soft_wrap=True)
    table = Table(title="Stacks (A → B)", title_justify="left")
    table.add_column("environment", no_wrap=True)
    table.add_column("changes", overflow="fold")
    for name, diff in diffs.items():
        text = diff if isinstance(diff, str) else "\n".join(diff.lines()) or "same stack"
        table.add_row(user_text(name), user_text(text))
    console.print(table)
    return EXIT_OK


def find_regressions(engine, pattern: str = "*", recent: int = changepoints.RECENT,
                     max_pvalue: float = changepoints.MAX_PVALUE,
                     min_change: float = changepoints.MIN_MAGNITUDE):
    from ..history.queries import cell_names, series

    found = []
    for name in cell_names(engine, pattern):
        found += changepoints.change_points(name, series(engine, name), recent, max_pvalue,
                                            min_change)
    return found


def do_regressions(engine, args, console) -> int:
    if args.recent < 1 or not 0 < args.max_pvalue < 1 or args.min_change < 0:
        raise UsageError("--recent must be ≥ 1, --max-pvalue in (0, 1), --min-change ≥ 0")
    found = find_regressions(engine, args.cell, args.recent, args.max_pvalue, args.min_change)
    table = Table(title=f"{len(found)} change points", title_justify="left")
    for column in ("cell", "at run", "before ms", "after ms", "after/before (95 %)", "p",
                   "new", "stack diff at that run"):
        table.add_column(column, overflow="fold")
    for cp in found:
        style = "bold red" if cp.slower else "green"
        interval = (f" ({cp.ratio_low:.3f}–{cp.ratio_high:.3f})"
                    if cp.ratio_low is not None else "")
        table.add_row(user_text(cp.cell_name), user_text(cp.point.run_id), _fmt(cp.before_ms),
                      _fmt(cp.after_ms), f"[{style}]{cp.ratio:.3f}{interval} {cp.direction}[/]",
                      f"{cp.pvalue:.2g}", "yes" if cp.new else "no",
                      user_text(cp.change.text()) if cp.change else "–")
    console.print(table)
    slower = [cp for cp in found if cp.new and cp.slower]
    console.print(f"{len(slower)} new slowdowns (change points within the newest {args.recent} "
                  f"runs of their series)", soft_wrap=True)
    if args.issue:
        write_issues(engine, slower, console)
    return EXIT_FAILED_CELLS if slower else EXIT_OK


def write_issues(engine, slower, console) -> None:
    """issue.md for each run that made a cell slower: that run's environment against the run
    before it in the cell's series (their folders, where they still are)."""
    from ..history.queries import run_row, series
    from ..results.render.issue import issue_from_runs

    pairs: dict[tuple[str, str, str], list[str]] = {}
    for cp in slower:
        ok = [p for p in series(engine, cp.cell_name) if p.status == "ok" and p.median_ms]
        key = (ok[cp.index - 1].run_id, cp.point.run_id, cp.point.environment)
        pairs.setdefault(key, []).append(f"{cp.cell_name}: a change point of the history, "
                                         f"{cp.ratio:.3f}× its level before ({cp.pvalue:.2g})")
    for (before, after, environment), notes in pairs.items():
        folders = [Path(run_row(engine, run)["path"] or "") for run in (before, after)]
        if not all((f / "manifest.json").is_file() for f in folders):
            console.print(f"[yellow]! issue: the run folders of {user_text(before)} and "
                          f"{user_text(after)} are no longer where they were stored[/]",
                          soft_wrap=True)
            continue
        path = issue_from_runs((folders[0], environment), (folders[1], environment), notes)
        console.print(f"issue: {user_text(str(path))}", soft_wrap=True, highlight=False)


def do_site(engine, args, console) -> int:
    from ..history.site import write_site

    index = write_site(engine, args.output)
    console.print(f"site: {user_text(str(index))}", soft_wrap=True)
    return EXIT_OK


ACTIONS = {"import": do_import, "list": do_list, "show": do_show, "diff": do_diff,
           "regressions": do_regressions, "site": do_site}
