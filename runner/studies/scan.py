"""`runner scan MATRIX --channel nightly --from DATE --to DATE [--every N]`: the dated builds of
a channel measured day by day, then every change point between days named.

The environments of the matrix that follow the channel (`channel = "nightly"`) take each day's
build in turn (the matrix's `date`, set for that run); the others stay as they are, a reference
measured beside them. Each day is one run of the matrix — its folder, manifest, reports and
history as any run's — so each build is measured once (`--every N`: every N-th day). A day
without a build of every followed distribution is skipped, and said so, before anything runs.

Then the history reads the runs in the order of their builds (history/days.py) and names every
change point between days, more than one where there are more (the JAX project scans nightly
builds day by day before bisecting, because a bisect stops at one change and can hide a second).
The first day that made a cell slower is handed on: where only the channel's own builds moved
between that day and the one before, they are named; where other distributions moved with them,
the bisect over distributions (studies/bisect.py) finds which one did it. An issue-ready report
of that day against the day before is written into the bad day's run folder (issue.md)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from ..environments import channels, indexes
from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, user_text
from ..run import pipeline
from ..run.state import RunState, Step
from ..schema import matrix as matrix_mod
from ..schema.values import check_build_date

MAX_DAYS = 366


@dataclass
class Scan:
    """What the scan asks: its channel, days and matrix; what it found as it goes."""

    opts: pipeline.Options
    channel: str
    days: list[str]
    bisect: bool = True
    runs: dict[str, str] = field(default_factory=dict)         # run id → the day of its build
    folders: dict[str, Path] = field(default_factory=dict)     # run id → its folder
    cells: set[str] = field(default_factory=set)               # the followed environments' cells
    builds: set[str] = field(default_factory=set)              # the channel's distributions


def scan_days(first: str, last: str, every: int) -> list[str]:
    """The days from `first` to `last`, every `every`-th; UsageError for a bad range."""
    try:
        start = datetime.date.fromisoformat(check_build_date(first))
        end = datetime.date.fromisoformat(check_build_date(last))
    except ValueError as exc:
        raise UsageError(f"scan --from/--to: {exc}") from None
    if every < 1 or end < start:
        raise UsageError(f"scan: --from {first} must not be after --to {last}, and --every "
                         f"is at least 1 (got {every})")
    count = (end - start).days // every + 1
    if count > MAX_DAYS:
        raise UsageError(f"scan: {count} days; at most {MAX_DAYS} (use --every)")
    return [(start + datetime.timedelta(days=n * every)).isoformat() for n in range(count)]


def followers(matrix: matrix_mod.Matrix, channel: str) -> dict[str, tuple[str, ...]]:
    """Environment → the distributions that follow `channel` in it; UsageError when none."""
    out = {name: channels.followed(env.follow, env.api)
           for name, env in matrix.spec.environments.items() if env.channel_name == channel}
    if not out:
        raise UsageError(f"{matrix.path}: no environment follows the {channel} channel (give "
                         f"one channel = {channel!r})")
    return out


def days_with_builds(names: set[str], days: list[str], flavour: str,
                     on_skip: Callable[[str], None]) -> list[str]:
    """The days every followed distribution has a build of; the others said and left out."""
    have = set(days)
    for name in sorted(names):
        twin = channels.NIGHTLY.get(name)
        if twin is None:
            raise UsageError(f"scan: {name} has no nightly channel the runner knows")
        index = twin.index_for(flavour)
        if index and (why := indexes.unreachable(index)):
            raise UsageError(f"scan: {name}'s nightly builds are published on {index}, which "
                             f"cannot be reached from here ({why})")
        try:
            listed = channels.listed(twin.name, index)
        except channels.ChannelError as exc:
            raise UsageError(f"scan: {exc}") from None
        built = {d for v in listed if (d := channels.build_day(v))}
        for day in sorted(have - built):
            on_skip(f"{day}: no {twin.name} build that day; skipped")
        have &= built
    return [d for d in days if d in have]


def the_day(scan: Scan, day: str, environments: tuple[str, ...]) -> Step:
    """After load_matrix: the followed environments set to `day`'s build, the cells made
    again (a cell's id holds its stack's day)."""
    def step(state: RunState) -> None:
        matrix = state.matrix
        for name in environments:
            matrix.spec.environments[name].date = day
            matrix.resolved["environments"][name]["date"] = day
        matrix.cells = matrix_mod.expand(matrix, matrix.path)
        if matrix.spec.run.calibrate:
            matrix.calibration = matrix_mod.calibration_cells(matrix)
        scan.cells |= {c.name for c in matrix.cells if c.environment in environments}
    return step


def run_day(scan: Scan, day: str, environments: tuple[str, ...], console: Console) -> int:
    steps = list(pipeline.RUN)
    steps.insert(steps.index(pipeline.load_matrix) + 1, the_day(scan, day, environments))
    state = RunState(scan.opts, console)
    console.rule(f"scan: {day}")
    code = pipeline.execute(tuple(steps), state)
    if state.progress.store is not None:
        root = state.progress.store.root
        run_id = state.progress.manifest.get("run_id") or root.name
        scan.runs[run_id], scan.folders[run_id] = day, root
    return code


def run_scan(opts: pipeline.Options, console: Console, channel: str, first: str, last: str,
             every: int = 1, bisect: bool = True) -> int:
    """The scan: each day's run, then the change points between days and the first bad day
    handed on. Exit 1 when a day's run had failed cells or a change point made a cell slower."""
    from ..environments import decide_flavour
    from ..machine import hostinfo

    wanted = scan_days(first, last, every)
    matrix = matrix_mod.load(opts.matrix_path, opts.profile, gpu_found=hostinfo.gpu_found())
    follow = followers(matrix, channel)
    facts = hostinfo.gpu_facts()
    flavour = decide_flavour(facts.get("gpu_count") or 0, facts.get("gpu_name")).name
    names = {n for found in follow.values() for n in found}

    def skipped(line: str) -> None:
        console.print(f"[yellow]scan: {user_text(line)}[/]", soft_wrap=True)

    scan = Scan(opts, channel, days_with_builds(names, wanted, flavour, skipped), bisect)
    scan.builds = {channels.NIGHTLY[n].name for n in names}
    if not scan.days:
        raise UsageError(f"scan: no day from {wanted[0]} to {wanted[-1]} has a build of "
                         f"{', '.join(sorted(scan.builds))}")
    console.print(f"scan: {len(scan.days)} days of {', '.join(sorted(scan.builds))} "
                  f"({', '.join(scan.days)}) in {', '.join(follow)}", soft_wrap=True)
    worst = EXIT_OK
    for day in scan.days:
        code = run_day(scan, day, tuple(follow), console)
        if opts.dry_run:
            return code
        if code not in (EXIT_OK, EXIT_FAILED_CELLS):      # interrupted: what ran is kept
            return code
        worst = max(worst, code)
    return max(worst, found_changes(scan, matrix, console))


def found_changes(scan: Scan, matrix: matrix_mod.Matrix, console: Console) -> int:
    """The change points between the scan's days, shown; the first slowdown handed on."""
    from ..history import days as days_mod, db, destination

    url = destination.resolve(None, matrix.spec.history.url, scan.opts.results_dir)[0]
    engine = db.open_history(url)
    try:
        show_days(scan, engine, console)
        changes = days_mod.day_changes(engine, scan.cells, scan.runs)
        if len(scan.runs) < days_mod.MIN_DAYS:
            console.print(f"scan: {len(scan.runs)} days measured; a change point needs at least "
                          f"{days_mod.MIN_DAYS} (two a level)", soft_wrap=True)
        for change in changes:
            show_change(change, console)
        slower = [c for c in changes if c.point.slower]
        if slower:
            hand_on(scan, slower[0], engine, console)
        elif len(scan.runs) >= days_mod.MIN_DAYS:
            console.print("scan: no change point between these days", soft_wrap=True)
        return EXIT_FAILED_CELLS if slower else EXIT_OK
    finally:
        engine.dispose()


def show_days(scan: Scan, engine, console: Console) -> None:
    """Each followed cell's median by day (its 95 % interval where it has one)."""
    from ..history import days as days_mod
    from ..results.formatting import fmt

    for cell in sorted(scan.cells):
        points = days_mod.day_series(engine, cell, scan.runs)
        said = " · ".join(
            f"{scan.runs[p.run_id]} {fmt(p.median_ms)}" + (
                f" ({fmt(p.ci_low_ms)}–{fmt(p.ci_high_ms)})" if p.ci_low_ms is not None else "")
            if p.status == "ok" else f"{scan.runs[p.run_id]} {p.status}" for p in points)
        console.print(f"scan: {user_text(cell)} ms/step: {said}", soft_wrap=True,
                      highlight=False)


def show_change(change, console: Console) -> None:
    cp = change.point
    interval = f" ({cp.ratio_low:.3f}–{cp.ratio_high:.3f})" if cp.ratio_low is not None else ""
    style = "bold red" if cp.slower else "green"
    console.print(f"change point: {user_text(change.cell_name)} between {change.day_before} and "
                  f"{change.day_after}: [{style}]{cp.ratio:.3f}×{interval} {cp.direction}[/] "
                  f"(p={cp.pvalue:.2g}); {user_text(change.change.text())}", soft_wrap=True)


def hand_on(scan: Scan, change, engine, console: Console) -> None:
    """The first bad day: the channel's builds named where they alone moved, else the bisect
    over what moved; then the issue-ready report of that day against the day before."""
    before, after = scan.folders[change.run_before], scan.folders[change.run_after]
    others = change.others(scan.builds)
    moved = "; ".join(f"{n} {a} → {b}" for n, (a, b) in change.change.distributions().items()
                      if n in scan.builds)
    notes = [f"Found by a day-by-day scan of the {scan.channel} builds ({scan.days[0]} to "
             f"{scan.days[-1]}): the first day slower is {change.day_after}, the day before "
             f"{change.day_before}."]
    if not others:
        said = f"only the {scan.channel} build moved between those days: {moved}"
    elif scan.bisect:
        said = f"{len(others)} other distributions moved with it ({', '.join(others)}): bisecting"
    else:
        said = (f"{len(others)} other distributions moved with it; bisect with: python -m "
                f"runner bisect RUN_GOOD RUN_BAD --cell {change.cell_name}")
    console.print(f"scan: first bad day {change.day_after} ({user_text(change.cell_name)}): "
                  f"{user_text(said)}", soft_wrap=True)
    notes.append(said[0].upper() + said[1:] + ".")
    if others and scan.bisect:
        notes.append(f"Bisect over distributions: {bisected(engine, before, after, change, console)}.")
    from ..results.render.issue import issue_from_runs

    environment = change.point.point.environment
    path = issue_from_runs((before, environment), (after, environment), notes)
    console.print(f"issue: {user_text(str(path))}", soft_wrap=True, highlight=False)


def bisected(engine, before: Path, after: Path, change, console: Console) -> str:
    """The bisect between the two days' runs; what it concluded (its history's message)."""
    from ..history.queries import bisect_conclusion
    from .bisect import Bisect

    found = Bisect(engine, before, after, change.cell_name, None, None, [], console)
    found.run()
    return bisect_conclusion(engine, found.pk) or "no conclusion"
