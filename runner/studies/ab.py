"""`runner ab MATRIX --a ENV --b ENV`: two environments measured in pairs, then B ÷ A per cell.

The matrix's run with only the two environments' cells that pair (the same workload, task,
batch size, axes and options), its plan reordered so that the two sides' processes alternate
in pairs, A B B A A B B A …: for every pair of cells, round k runs A then B when k is odd, B
then A when even, each a fresh process as always. Slow drift of the machine (heat, other load)
then falls on both sides alike, and neither always runs first after the other's process.
Everything else is the run's own (its folder, manifest, reports, history); the report's
baseline is A. Afterwards the pair table (results/analysis/ab.py: compare's verdict and
detectable change, Welch's interval of B ÷ A) is printed as Markdown and written to ab.md.

Without --a and --b the matrix's two environments are A and B, in the matrix's order."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, did_you_mean
from ..run import pipeline
from ..run.plan import Entry
from ..run.state import RunState, Step
from ..schema.matrix import Cell, Matrix


@dataclass(frozen=True)
class Sides:
    a: str
    b: str


def sides_of(matrix: Matrix, a: str | None, b: str | None) -> Sides:
    """A and B: --a and --b, else the matrix's two environments; UsageError naming what is
    wrong."""
    names = list(matrix.spec.environments)
    if (a is None) != (b is None):
        raise UsageError("ab: give both --a and --b, or neither (the matrix's two environments)")
    if a is None or b is None:
        if len(names) != 2:
            raise UsageError(f"{matrix.path}: ab needs --a ENV --b ENV: the matrix has "
                             f"{len(names)} environments ({', '.join(names)})")
        return Sides(names[0], names[1])
    for flag, name in (("--a", a), ("--b", b)):
        if name not in names:
            raise UsageError(f"ab {flag}: {name!r} is no environment of {matrix.path}"
                             f"{did_you_mean(name, names)}")
    if a == b:
        raise UsageError(f"ab: --a and --b name the same environment {a!r}")
    return Sides(a, b)


def row_of(cell: Cell) -> str:
    """What pairs a cell with the other side's: everything but its environment."""
    return json.dumps([cell.workload, cell.task, cell.batch_size, cell.axes, cell.options,
                       cell.steps, cell.warmup_steps, cell.repeats], sort_keys=True, default=str)


def pairs_of(cells: list[Cell], sides: Sides) -> list[tuple[Cell, Cell]]:
    """(A's cell, B's cell) of every row both sides have, in the matrix's order."""
    of_b = {row_of(c): c for c in cells if c.environment == sides.b}
    return [(c, of_b[row_of(c)]) for c in cells
            if c.environment == sides.a and row_of(c) in of_b]


def paired_order(to_run: list[Entry], pairs: list[tuple[Cell, Cell]]) -> list[Entry]:
    """The plan's entries as pairs: round k of each pair A then B (k odd) or B then A; an
    entry of no pair (--only chose one side of it) after them, never dropped."""
    wanted = {entry.key: entry for entry in to_run}
    rounds = max((a.repeats for a, _ in pairs), default=0)
    out = []
    for repeat in range(1, rounds + 1):
        for a, b in pairs:
            first, second = (a, b) if repeat % 2 else (b, a)
            out += [wanted.pop(key) for key in (Entry(first, repeat).key,
                                                Entry(second, repeat).key) if key in wanted]
    return out + list(wanted.values())


def keep_the_pairs(a: str | None, b: str | None, chosen: dict[str, Sides],
                   console: Console) -> Step:
    """After load_matrix: A and B chosen (into `chosen`), the matrix narrowed to the cells
    that pair, A the report's baseline."""
    def step(state: RunState) -> None:
        matrix = state.matrix
        sides = chosen["sides"] = sides_of(matrix, a, b)
        pairs = pairs_of(matrix.cells, sides)
        if not pairs:
            raise UsageError(f"{matrix.path}: {sides.a} and {sides.b} have no cell in common "
                             "(the same workload, task, batch size, axes and options)")
        kept = {c.id for pair in pairs for c in pair}
        left = [c.name for c in matrix.cells if c.id not in kept]
        if left:
            console.print(f"ab: {len(left)} cells without a partner left out "
                          f"({', '.join(left[:3])}{' …' if len(left) > 3 else ''})",
                          soft_wrap=True, highlight=False)
        matrix.cells = [c for c in matrix.cells if c.id in kept]
        matrix.calibration = [c for c in matrix.calibration
                              if c.environment in (sides.a, sides.b)]
        matrix.spec.report.baseline_environment = sides.a
        matrix.resolved.setdefault("report", {})["baseline_environment"] = sides.a
    return step


def plan_in_pairs(chosen: dict[str, Sides]) -> Step:
    """plan_cells, then its entries in pairs (A B B A …)."""
    def step(state: RunState) -> None:
        pipeline.plan_cells(state)
        plan = state.plan
        plan.to_run = paired_order(plan.to_run, pairs_of(plan.cells, chosen["sides"]))
    return step


def steps(a: str | None, b: str | None, chosen: dict[str, Sides],
          console: Console) -> tuple[Step, ...]:
    """The run's steps (pipeline.RUN), the pairs kept after the matrix is loaded and planned
    in pairs."""
    swap: dict[Callable, Step] = {pipeline.plan_cells: plan_in_pairs(chosen)}
    out: list[Step] = []
    for step in pipeline.RUN:
        out.append(swap.get(step, step))
        if step is pipeline.load_matrix:
            out.append(keep_the_pairs(a, b, chosen, console))
    return tuple(out)


def run_ab(opts: pipeline.Options, console: Console, a: str | None, b: str | None,
           threshold: float | None = None) -> int:
    """The A/B run, then its table (printed, and ab.md in the run folder). Its exit code is
    the run's (1 when a cell failed), or 1 when B is slower than A in any cell."""
    from ..results.analysis.ab import pair_table, side
    from ..results.data.store import open_run
    from ..results.render import ab as ab_render

    chosen: dict[str, Sides] = {}
    state = pipeline.RunState(opts, console)
    code = pipeline.execute(steps(a, b, chosen, console), state)
    if opts.dry_run or state.progress.store is None:
        return code
    store, manifest = open_run(state.progress.store.root)
    records = store.records(manifest)
    sides = chosen["sides"]
    table = pair_table(side(records, manifest, sides.a), side(records, manifest, sides.b),
                       threshold)
    text = ab_render.markdown(table)
    store.write_text(ab_render.NAME, text)
    console.print(f"\n{text}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"ab: {store.root / ab_render.NAME}", soft_wrap=True, highlight=False)
    return code or (EXIT_FAILED_CELLS if table.slower else EXIT_OK)
