"""What a run says on the terminal about its plan and setup (rich): the profile, the executor,
flavour and lanes and why, the environments and what each uses, what will be built, the plan
table, the machine's profile, each environment and cell as it finishes, the results tables.

Every line is printed with soft_wrap: one line each, whatever the terminal's width (logs and
tests read them); every user string goes through escape (a name is text, never markup).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import scheduling
from .executors.base import Prepared
from .matrix import Cell, Matrix
from .plan import Entry, Plan
from .results.formatting import fmt
from .results.terminal import tables
from .run_setup import Setup
from .results.types import CellSummary, Manifest


def show_profile(matrix: Matrix, console: Console) -> None:
    console.print(f"[bold]profile:[/] {matrix.profile} ({escape(matrix.profile_reason)})",
                  soft_wrap=True)


def show_setup(matrix: Matrix, setup: Setup, cells: list[Cell], console: Console) -> None:
    """The executor, flavour and lanes and why; per environment of `cells` what it uses and
    the variables its workers get."""
    console.print(f"[bold]executor:[/] {setup.executor.name} ({escape(setup.reason)})",
                  soft_wrap=True)
    console.print(f"[bold]flavour:[/] {setup.flavour.name} ({escape(setup.flavour.reason)})",
                  soft_wrap=True)
    lanes, why = setup.lanes()
    console.print(f"[bold]parallel:[/] {scheduling.lanes_text(lanes)} ({escape(why)})",
                  soft_wrap=True)
    if cells:
        console.print(environment_table(matrix, setup, cells))
        show_stacks(setup, cells, console)
        show_env(matrix, cells, console)


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
        console.print(f"[bold]derived:[/] {escape(stack.label)} → lock sha {stack.sha256[:12]} "
                      f"({escape(', '.join(names))}, {stack.flavour}: {escape(shown or 'as the folder lock')})",
                      soft_wrap=True, highlight=False)


def environment_table(matrix: Matrix, setup: Setup, cells: list[Cell]) -> Table:
    """Per environment: the executor, the flavour and the lock, image or interpreter it uses."""
    table = Table(title="Environments", title_justify="left")
    for column in ("environment", "api", "executor", "flavour"):
        table.add_column(column, no_wrap=True)
    table.add_column("uses", overflow="fold")
    for name in dict.fromkeys(c.environment for c in cells):
        env = matrix.spec.environments[name]
        executor, flavour, uses = setup.would_use(setup.environment_source(matrix, name))
        api = env.api + (f"/{env.backend}" if env.backend else "")
        table.add_row(escape(name), escape(api), executor, flavour or "as installed",
                      escape(uses))
    return table


def show_env(matrix: Matrix, cells: list[Cell], console: Console) -> None:
    """The variables each environment's workers get from the matrix ([run] preallocate and its
    own env), one line per environment that sets any; unsafe_env is said."""
    first = {c.environment: c for c in reversed(cells)}
    lines = []
    for name in dict.fromkeys(c.environment for c in cells):
        variables = " ".join(f"{k}={v}" for k, v in first[name].env.items())
        unsafe = matrix.spec.environments[name].unsafe_env
        if variables:
            lines.append(f"[bold]env {escape(name)}:[/] {escape(variables)}"
                         + (" [red](unsafe_env = true)[/]" if unsafe else ""))
    for line in lines or ["[bold]env:[/] no environment sets variables"]:
        console.print(line, soft_wrap=True, highlight=False)


def show_preparation(matrix: Matrix, setup: Setup, plan: Plan, calibrations: list[Cell],
                     console: Console, action: str = "prepares") -> None:
    """One line: what will be built (or found ready) and why, and what the selection leaves
    out — environments sharing an image folder share one build."""
    needs: dict[str, dict[str, Any]] = {}
    for cell, what in [(e.cell, "cells") for e in plan.to_run] + \
            [(c, "calibration") for c in calibrations]:
        need = needs.setdefault(setup.source_of(cell).label,
                                {"envs": {}, "cells": 0, "calibration": 0})
        need["envs"][cell.environment] = True
        need[what] += 1
    parts = []
    for key, need in needs.items():
        why = [f"{need['cells']} runs"] if need["cells"] else []
        why += ["calibration"] if need["calibration"] else []
        parts.append(f"{key} ({', '.join(need['envs'])}: {' + '.join(why)})")
    used = {env for need in needs.values() for env in need["envs"]}
    left = [name for name in matrix.spec.environments if name not in used]
    line = f"{action} {len(parts)} environment(s): " + ("; ".join(parts) or "none")
    if left:
        line += f"; not {', '.join(left)} (no selected cell runs there)"
    console.print(f"[bold]build:[/] {escape(line)}", soft_wrap=True, highlight=False)


def plan_table(matrix: Matrix, plan: Plan) -> Table:
    table = Table(title=escape(f"Plan: {matrix.path} (profile {matrix.profile})"),
                  title_justify="left")
    table.add_column("cell", overflow="fold")
    table.add_column("id", no_wrap=True)
    table.add_column("repeats", justify="right")
    table.add_column("steps", justify="right")
    table.add_column("state", overflow="fold")
    pending = {e.cell.id for e in plan.to_run}
    done_counts = Counter(e.cell.id for e in plan.done)
    for cell in plan.cells:
        done = done_counts[cell.id]
        state = "to run" if cell.id in pending else "done"
        if done and cell.id in pending:
            state = f"{done} done, rest to run"
        table.add_row(escape(cell.name), cell.id, str(cell.repeats),
                      f"{cell.warmup_steps}+{cell.steps}", state)
    for cell in plan.not_applicable:
        table.add_row(escape(cell.name), cell.id, "–", "–",
                      f"[yellow]NA: {escape(cell.not_applicable or '')}[/]")
    table.caption = (f"{len(plan.to_run)} runs to do, {len(plan.done)} done, "
                     f"{len(plan.not_applicable)} not applicable, {plan.filtered_out} filtered out")
    return table


def announce_machine(manifest: Manifest, console: Console) -> None:
    """The run's first lines say whether this machine's noise is known (a machine profile)."""
    profile = manifest.get("machine_profile") or {}
    if profile.get("found"):
        console.print(f"[bold]machine profile:[/] {escape(profile['path'])} (compare threshold "
                      f"{profile.get('threshold', 0) * 100:.1f} %, measured "
                      f"{profile.get('measured_at')})", soft_wrap=True)
    elif profile.get("key"):
        console.print(f"[yellow]! {escape(profile['why'])}: its noise is unknown; measure it "
                      f"with `python -m runner doctor --measure MATRIX`[/]", soft_wrap=True)


def show_prepared(key: str, ready: Prepared, took: float, console: Console) -> None:
    label = escape(key)
    if ready.error:
        console.print(f"[red]✗ environment {label}: {escape(ready.error)}[/]")
    else:
        console.print(f"[green]✓[/] environment {label} ready ({took:.0f} s)")
    for warning in ready.warnings:
        console.print(f"[yellow]! environment {label}: {escape(warning)}[/]")


def cell_line(entry: Entry, record: Mapping[str, Any]) -> str:
    """✓ name r2 [GPU 1]: 12.3 ms/step — a cell × repeat as it finishes."""
    mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
    return (f"{mark} {escape(entry.cell.name)} r{entry.repeat}"
            f"{escape(ran_on(record))}: {escape(outcome_text(record))}")


def calibration_line(cell: Cell, record: Mapping[str, Any]) -> str:
    mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
    return (f"{mark} calibration {escape(cell.environment)} "
            f"{cell.axes['precision']}: {escape(peak_text(record))}")


def peak_text(record: Mapping[str, Any]) -> str:
    if record["status"] != "ok":
        return outcome_text(record)
    return f"{record['achieved_tflops']:.4g} TFLOP/s at n={record['options'].get('n')}"


def ran_on(record: Mapping[str, Any]) -> str:
    """[GPU 1] or [127.0.0.3 GPU 0]: where a record's cell ran, for the progress lines of a
    parallel or Ray run."""
    meta = record.get("metadata") or {}
    parts = [meta["node_ip"]] if "node_ip" in meta else []
    if "gpu_index" in meta:
        parts.append(f"GPU {meta['gpu_index']}")
    return f" [{' '.join(parts)}]" if parts else ""


def outcome_text(record: Mapping[str, Any]) -> str:
    if record["status"] == "ok" and record.get("median_ms") is not None:
        return f"{fmt(record['median_ms'])} ms/step"
    error = (record.get("error") or "").strip().splitlines()
    return f"{record['status']}: {error[-1][:120] if error else ''}"


def show_results(summaries: list[CellSummary], title: str, root: Path,
                 console: Console) -> None:
    """The results tables of a run, and where its report is."""
    for table in tables(summaries, escape(title)):
        console.print(table)
    console.print(f"report: {escape(str(root / 'report.md'))}", soft_wrap=True)
