"""`python -m runner compare RUN_A RUN_B`, shown: the comparison of two runs
(analysis/comparison.py says how each verdict is reached) as a stack table and a cell table on
the terminal and as Markdown (RUN_B/compare-<A>.md), and the command's exit code."""

from __future__ import annotations

from pathlib import Path

from rich.console import JustifyMethod

from ...errors import user_text
from ..formatting import md_code, md_text
from ...worker.protocol import write_text_atomic
from ..analysis.comparison import (FASTER, NOT_COMPARABLE, SAME, SLOWER, Comparison,
                                   compare_runs)


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


def summary_line(comparison: Comparison) -> str:
    gm = comparison.geometric_mean_ratio
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in (FASTER, SLOWER, SAME, NOT_COMPARABLE))
    hidden = len(comparison.slower_unjudged)
    if hidden:
        counts += (f" ({hidden} of them significantly slower beyond the threshold all the same: "
                   "exit 1)")
    mean = (f"geometric mean of B/A over {len(comparison.comparable)} comparable cells: "
            f"{gm:.3f}" if gm is not None else "no comparable cells")
    differ = comparison.different_stacks
    stacks = (f"; {len(differ)} of {len(comparison.stacks)} environments on different stacks "
              f"({', '.join(s.environment for s in differ)})" if differ else "")
    return f"{counts}; {mean}{stacks}"


def markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [f"# Compare: {md_code(c.run_b)} (B) against {md_code(c.run_a)} (A)", "",
             f"A ms and B ms: each cell's geometric mean of its repeat medians; ratio = B ÷ A of "
             f"those (below 1: B faster). "
             f"A cell is faster or slower only when Welch's t-test on the log repeat medians (the "
             f"repeat, a fresh process, is the independent unit) gives p < {c.alpha:g} **and** "
             f"the ratio is beyond both the threshold ({md_text(c.threshold_source)}; up to "
             f"{c.threshold * 100:g} %) and the run-to-run spread of repeat medians.", "",
             f"**{md_text(summary_line(c))}**", "",
             "## Stacks", "",
             "Per environment: the lock hash or image digest and id, the installed "
             "distributions, the driver, the GPU model and its power limit, the runner's version "
             "and the environment variables the matrix set, of A against B.", "",
             "| Environment | Stack |", "|---|---|"]
    for stack in c.stacks:
        text = md_text(stack.describe())
        lines.append(f"| {md_text(stack.environment)} | {text if stack.same else f'**{text}**'} |")
    lines += ["", "## Cells", "",
              "| Workload (task) | Batch size | Environment | Stack | A ms | B ms | B/A | p | "
              "Verdict | Note |",
              "|---|---:|---|---|---:|---:|---:|---:|---|---|"]
    for cell in c.cells:
        verdict = f"**{cell.verdict}**" if cell.verdict in (FASTER, SLOWER) else cell.verdict
        stack_text = "**differs**" if cell.stack_differs else "same"
        lines.append(f"| {md_text(cell.label)} | {cell.batch_size} | {md_text(cell.environment)} | "
                     f"{stack_text} | "
                     f"{_fmt(cell.time_a_ms, '.4g')} | {_fmt(cell.time_b_ms, '.4g')} | "
                     f"{_fmt(cell.ratio, '.3f')} | {_fmt(cell.p_value, '.2g')} | {verdict} | "
                     f"{md_text(cell.reason)} |")
    return "\n".join(lines) + "\n"


STYLES = {FASTER: "green", SLOWER: "bold red", SAME: "", NOT_COMPARABLE: "yellow"}


def terminal_table(comparison: Comparison):
    from rich.table import Table

    table = Table(title=user_text(f"B = {comparison.run_b}\nA = {comparison.run_a}",
                                  keep_lines=True), title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("Workload (task), batch", "left"), ("Environment", "left"), ("Stack", "left"),
        ("A ms", "right"), ("B ms", "right"), ("B/A", "right"), ("p", "right"),
        ("Verdict", "left"), ("Note", "left"))
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=name in ("B/A", "p", "Verdict"))
    for cell in comparison.cells:
        style = STYLES[cell.verdict]
        verdict = f"[{style}]{cell.verdict}[/]" if style else cell.verdict
        table.add_row(user_text(f"{cell.label}, b{cell.batch_size}"), user_text(cell.environment),
                      "[yellow]differs[/]" if cell.stack_differs else "same",
                      _fmt(cell.time_a_ms, ".4g"), _fmt(cell.time_b_ms, ".4g"),
                      _fmt(cell.ratio, ".3f"), _fmt(cell.p_value, ".2g"), verdict,
                      user_text(cell.reason))
    table.caption = (f"A ms, B ms: geometric means of the repeat medians; B/A: their ratio; p: Welch's t-test on log repeat medians "
                     f"(alpha {comparison.alpha:g}); threshold: {comparison.threshold_source} "
                     f"(up to {comparison.threshold * 100:g} %), and the run-to-run spread")
    return table


def stack_table(comparison: Comparison):
    """Per environment: the same stack in A and B, or what differs."""
    from rich.table import Table

    table = Table(title="Stacks (A → B)", title_justify="left")
    table.add_column("Environment", no_wrap=True)
    table.add_column("Stack", overflow="fold")
    for stack in comparison.stacks:
        text = user_text(stack.describe())
        table.add_row(user_text(stack.environment), text if stack.same else f"[yellow]{text}[/]")
    return table


def cost_line(comparison: Comparison) -> str | None:
    """B against A in price too, where both runs have one: the geometric mean time ratio of the
    comparable cells with the ratio of the two VMs' per-GPU list prices (never a verdict)."""
    said = comparison.cost_versus
    return f"cost: B is {said} (list-price estimates; the verdicts are the time's)" \
        if said else None


def run_compare(run_a: Path, run_b: Path, threshold: float | None, alpha: float,
                markdown_path: Path | None, console,
                environments: tuple[str, str] | None = None) -> int:
    """The `compare` subcommand: tables on the terminal, Markdown to a file, exit code.
    threshold None: from the runs' machine profiles (choose_threshold)."""
    comparison = compare_runs(run_a, run_b, threshold, alpha, environments)
    console.print(stack_table(comparison))
    console.print(terminal_table(comparison))
    console.print(user_text(summary_line(comparison)), soft_wrap=True)
    priced = cost_line(comparison)
    if priced:
        console.print(user_text(priced), soft_wrap=True)
    console.print(f"threshold: {user_text(comparison.threshold_source)}", soft_wrap=True,
                  style="yellow" if "without a profile" in comparison.threshold_source else None)
    target = markdown_path or run_b / f"compare-{run_a.resolve().name}.md"
    write_text_atomic(target, markdown(comparison) + (f"\n{priced}\n" if priced else ""))
    console.print(f"compare: {user_text(str(target))}", soft_wrap=True)
    return comparison.exit_code
