"""What a run says on the terminal about its plan and setup (rich): the profile, the executor,
flavour and lanes and why, the environments and what each uses, what will be built, the plan
table, the machine's profile, each environment and cell as it finishes, the results tables.

Every line is printed with soft_wrap: one line each, whatever the terminal's width (logs and
tests read them); every user string goes through errors.user_text (a name is text, never markup or an
escape sequence).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..errors import shortened, user_text
from ..executors.base import Prepared
from ..machine.profile import MEASURE_HINT
from ..results.analysis.report_model import ReportModel
from ..results.data.types import Manifest, Record
from ..results.formatting import fmt
from ..results.render.terminal import tables
from ..schema.matrix import Cell, Matrix
from . import scheduling
from .plan import Entry, Plan
from .setup import Setup


def show_profile(matrix: Matrix, console: Console) -> None:
    console.print(f"[bold]profile:[/] {matrix.profile} ({user_text(matrix.profile_reason)})"
                  f"{left_out_text(matrix)}", soft_wrap=True)


def left_out_text(matrix: Matrix) -> str:
    """'; leaves out 12 benchmarks (470 cells) of the other profile (--profile full runs
    them)': what the matrix holds that this profile does not run."""
    if not matrix.left_out:
        return ""
    other = "smoke" if matrix.profile == "full" else "full"
    count, cells = len(matrix.left_out), sum(matrix.left_out.values())
    return (f"; leaves out {count} benchmark{'s' if count > 1 else ''} ({cells} cells) that "
            f"run under another profile (--profile {other} runs them)")


def show_setup(matrix: Matrix, setup: Setup, cells: list[Cell], console: Console,
               runs: Mapping[str, str] | None = None) -> None:
    """The executor, flavour and lanes and why; per environment of `cells` what it uses (and
    `runs`: what the run does there) and the variables its workers get."""
    console.print(f"[bold]executor:[/] {setup.executor.name} ({user_text(setup.reason)})",
                  soft_wrap=True)
    console.print(f"[bold]flavour:[/] {setup.flavour.name} ({user_text(setup.flavour.reason)})",
                  soft_wrap=True)
    lanes, why = setup.lanes()
    console.print(f"[bold]parallel:[/] {scheduling.lanes_text(lanes)} ({user_text(why)})",
                  soft_wrap=True)
    if cells:
        console.print(environment_table(matrix, setup, cells, runs))
        show_stacks(setup, cells, console)
        show_env(matrix, cells, console)
    for user in {c.user_workload.name: c.user_workload for c in cells if c.user_workload}.values():
        beside = len(user.modules) - 1
        console.print(f"[bold]workload {user_text(user.name)}:[/] {user_text(user.file)}"
                      f"{f' + {beside} module(s) beside it' if beside else ''} (code "
                      f"{user.sha256[:12]}, staged read-only in the run folder)", soft_wrap=True)


def runs_per_environment(plan: Plan, calibrations: Sequence[Cell]) -> dict[str, str]:
    """environment → what the run does there: "21 + calibration", "–" for nothing."""
    runs = Counter(e.cell.environment for e in plan.to_run)
    calibrated = {c.environment for c in calibrations}
    return {name: " + ".join(([str(runs[name])] if runs[name] else [])
                             + (["calibration"] if name in calibrated else [])) or "–"
            for name in dict.fromkeys(c.environment for c in plan.cells)}


def show_stacks(setup: Setup, cells: list[Cell], console: Console) -> None:
    """One line per derived stack of `cells`: what it derives from, its lock, what moved
    against the folder's own lock."""
    used: dict[str, list[str]] = {}
    for name in dict.fromkeys(c.environment for c in cells):
        if name in setup.stacks:
            used.setdefault(setup.stacks[name].lock.as_posix(), []).append(name)
    for names in used.values():
        stack = setup.stacks[names[0]]
        moved = stack.moved()
        shown = "; ".join(moved[:8]) + (f"; and {len(moved) - 8} more" if len(moved) > 8 else "")
        console.print(f"[bold]derived:[/] {user_text(stack.label)} → lock sha {stack.sha256[:12]} "
                      f"({user_text(', '.join(names))}, {stack.flavour}: {user_text(shown or 'as the folder lock')})",
                      soft_wrap=True, highlight=False)


def environment_table(matrix: Matrix, setup: Setup, cells: list[Cell],
                      runs: Mapping[str, str] | None = None) -> Table:
    """Per environment: its API, the lock, image or interpreter it uses, the runs it does; the
    executor, and the flavour, where one is not the run's (said on the lines above). One line
    per environment, no outer border: a screen holds the run's whole set-up."""
    rows = []
    for name in dict.fromkeys(c.environment for c in cells):
        env = matrix.spec.environments[name]
        executor, flavour, uses = setup.would_use(setup.environment_source(matrix, name))
        api = env.api + (f"/{env.backend}" if env.backend else "")
        rows.append((name, api, executor, flavour or "as installed", uses))
    own_executor = any(r[2] != setup.executor.name for r in rows)
    own_flavour = any(r[3] != setup.flavour.name for r in rows)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("environment", overflow="fold")
    table.add_column("api", overflow="fold")
    if own_executor:
        table.add_column("executor", no_wrap=True)
    if own_flavour:
        table.add_column("flavour", overflow="fold")
    table.add_column("uses", overflow="fold")
    if runs is not None:
        table.add_column("runs", overflow="fold")
    for name, api, executor, flavour, uses in rows:
        table.add_row(user_text(name), user_text(api), *([executor] if own_executor else []),
                      *([flavour] if own_flavour else []), user_text(uses),
                      *([runs.get(name, "–")] if runs is not None else []))
    return table


def show_env(matrix: Matrix, cells: list[Cell], console: Console) -> None:
    """The variables each environment's workers get from the matrix ([run] preallocate and its
    own env): those every environment gets once, then per environment the rest; unsafe_env
    is said."""
    first = {c.environment: c for c in reversed(cells)}
    names = list(dict.fromkeys(c.environment for c in cells))
    shared = dict(first[names[0]].env) if len(names) > 1 else {}
    for name in names[1:]:
        shared = {k: v for k, v in shared.items() if first[name].env.get(k) == v}
    lines = [f"[bold]env (every environment):[/] {user_text(_assignments(shared))}"] if shared else []
    for name in names:
        variables = _assignments({k: v for k, v in first[name].env.items() if k not in shared})
        unsafe = matrix.spec.environments[name].unsafe_env
        if variables or unsafe:
            lines.append(f"[bold]env {user_text(name)}:[/] {user_text(variables)}"
                         + (" [red](unsafe_env = true)[/]" if unsafe else ""))
    for line in lines or ["[bold]env:[/] no environment sets variables"]:
        console.print(line, soft_wrap=True, highlight=False)


def _assignments(variables: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in variables.items())


def show_preparation(matrix: Matrix, setup: Setup, plan: Plan, calibrations: Sequence[Cell],
                     console: Console, action: str = "prepares") -> None:
    """One line: the environments that will be built (or found ready; environments sharing an
    image folder share one build), and what the selection leaves out. What each is built for
    is in the environments table."""
    needed = [setup.source_of(cell).label
              for cell in [*(e.cell for e in plan.to_run), *calibrations]]
    used = {e.cell.environment for e in plan.to_run} | {c.environment for c in calibrations}
    left = [name for name in matrix.spec.environments if name not in used]
    folders = list(dict.fromkeys(needed))
    line = f"{action} {len(folders)} environment(s): " + (", ".join(folders) or "none")
    if left:
        line += f"; not {', '.join(left)} (no selected cell runs there)"
    console.print(f"[bold]build:[/] {user_text(line)}", soft_wrap=True, highlight=False)


def plan_table(matrix: Matrix, plan: Plan) -> Table:
    """The cells to run (or done), each name whole on its line where the terminal allows."""
    table = _listing(f"Plan: {matrix.path} (profile {matrix.profile})", plan.cells)
    for column in ("id", "repeats", "steps"):
        table.add_column(column, justify="left" if column == "id" else "right", no_wrap=True)
    table.add_column("state", overflow="fold", min_width=len("to run"))
    pending = {e.cell.id for e in plan.to_run}
    done_counts = Counter(e.cell.id for e in plan.done)
    for cell in plan.cells:
        done = done_counts[cell.id]
        state = "to run" if cell.id in pending else "done"
        if done and cell.id in pending:
            state = f"{done} done, rest to run"
        table.add_row(user_text(cell.name), cell.id, str(cell.repeats),
                      f"{cell.warmup_steps}+{cell.steps}", state)
    table.caption = (f"{len(plan.to_run)} runs to do, {len(plan.done)} done, "
                     f"{len(plan.not_applicable)} not applicable, {plan.filtered_out} filtered out"
                     + (f", {sum(matrix.left_out.values())} of another profile"
                        if matrix.left_out else ""))
    return table


def not_applicable_table(plan: Plan) -> Table | None:
    """The cells planned as not applicable, and why (the reason has the width left)."""
    if not plan.not_applicable:
        return None
    table = _listing("Not applicable (NA in the report)", plan.not_applicable)
    table.add_column("why", overflow="fold", style="yellow")
    for cell in plan.not_applicable:
        table.add_row(user_text(cell.name), user_text(cell.not_applicable or ""))
    return table


def _listing(title: str, cells: list[Cell]) -> Table:
    """A table of `cells`: no outer border, the names whole (up to 60 characters: the other
    columns fold first; longer names fold too)."""
    table = Table(title=user_text(title), title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    longest = max((len(c.name) for c in cells), default=4)
    # A table with one longer name (a layer cell's) keeps the others whole up to 55 characters.
    table.add_column("cell", overflow="fold", no_wrap=longest <= 60, min_width=min(longest, 55))
    return table


def show_history(url: str, why: str, console: Console) -> None:
    """Where the run's history goes (its password hidden), and why there."""
    from ..history.destination import shown

    console.print(f"[bold]history database:[/] {user_text(shown(url))} ({user_text(why)})",
                  soft_wrap=True, highlight=False)


def announce_machine(manifest: Manifest, console: Console) -> None:
    """The run's first lines say whether this machine's noise is known (a machine profile)."""
    profile = manifest.get("machine_profile") or {}
    if profile.get("found"):
        console.print(f"[bold]machine profile:[/] {user_text(profile['path'])} (compare threshold "
                      f"{profile.get('threshold', 0) * 100:.1f} %, measured "
                      f"{profile.get('measured_at')})", soft_wrap=True)
    elif profile.get("key"):
        console.print(f"[yellow]! {user_text(profile['why'])}; measure its noise: "
                      f"{MEASURE_HINT}[/]", soft_wrap=True)


def show_prepared(key: str, ready: Prepared, console: Console) -> bool:
    """An environment that could not be prepared, and any warning, at once; True when ready
    (said with the others: show_ready)."""
    label = user_text(key)
    if ready.error:
        console.print(f"[red]✗ environment {label}: {user_text(ready.error, keep_lines=True)}[/]")
    for warning in ready.warnings:
        console.print(f"[yellow]! environment {label}: {user_text(warning, keep_lines=True)}[/]")
    return not ready.error


def show_ready(took: Mapping[str, float], console: Console) -> None:
    """One line: the environments that are ready and how long each took."""
    if took:
        console.print("[green]✓[/] environments ready: " + ", ".join(
            f"{user_text(key)} ({seconds:.0f} s)" for key, seconds in took.items()), soft_wrap=True)


# A cell's name on its line (the record keeps it whole): room left for the outcome and pace.
CELL_LABEL_CHARACTERS = 240


def cell_label(name: str) -> str:
    return user_text(shortened(name, CELL_LABEL_CHARACTERS))


def cell_line(entry: Entry, record: Record, pace: str = "") -> str:
    """✓ name r2 [GPU 1]: 12.3 ms/step — a cell × repeat as it finishes; `pace` after it:
    "[k/N] finish ~17:42 (9 min left)" (run/pace.py)."""
    mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
    return (f"{mark} {cell_label(entry.cell.name)} r{entry.repeat}"
            f"{user_text(ran_on(record))}: {user_text(outcome_text(record))}"
            f"{f' · {pace}' if pace else ''}")


def calibration_line(cell: Cell, record: Record) -> str:
    mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
    return (f"{mark} calibration {user_text(cell.environment)} "
            f"{cell.axes.precision}: {user_text(peak_text(record))}")


def calibration_summary(records: Sequence[Mapping[str, Any]], took: float, reused: int = 0,
                        cache: Path | None = None) -> str:
    """One line for the calibrations that went well (each failure has its own line), and the
    peaks the machine's cache gave (measured before on this VM, with the same locks)."""
    ok = [r for r in records if r["status"] == "ok"]
    peaks = sorted(float(r["achieved_tflops"]) for r in ok)
    span = f": {fmt(peaks[0])}–{fmt(peaks[-1])} TFLOP/s" if peaks else ""
    cached = (f"{reused} cached peak(s) reused from {user_text(str(cache))} (--recalibrate "
              "measures them again)" if reused else "")
    if not records:
        return f"[green]✓[/] calibration: {cached}"
    return (f"[green]✓[/] calibration: {len(ok)} peak(s) in "
            f"{len({r['environment'] for r in ok})} environment(s){span} ({took:.0f} s; "
            f"the report lists them){f'; {cached}' if cached else ''}")


def peak_text(record: Record) -> str:
    if record["status"] != "ok":
        return outcome_text(record)
    return f"{record['achieved_tflops']:.4g} TFLOP/s at n={record['options'].get('n')}"


def ran_on(record: Record) -> str:
    """[GPU 1] or [127.0.0.3 GPU 0]: where a record's cell ran, for the progress lines of a
    parallel or Ray run."""
    meta = record.get("metadata") or {}
    parts = [meta["node_ip"]] if "node_ip" in meta else []
    if "gpu_index" in meta:
        parts.append(f"GPU {meta['gpu_index']}")
    return f" [{' '.join(parts)}]" if parts else ""


def outcome_text(record: Record) -> str:
    if record["status"] == "ok" and record.get("median_ms") is not None:
        return f"{fmt(record['median_ms'])} ms/step"
    error = (record.get("error") or "").strip().splitlines()
    return f"{record['status']}: {error[-1][:120] if error else ''}"


def show_results(report: ReportModel, title: str, root: Path, console: Console) -> None:
    """The results tables of a run (its report model), and where its report is."""
    for table in tables(report, user_text(title)):
        console.print(table)
    console.print(f"report: {user_text(str(root / 'report.md'))}", soft_wrap=True)
