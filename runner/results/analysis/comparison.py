"""`python -m runner compare RUN_A RUN_B`: did B get faster or slower than A, cell by cell?

The independent unit is the repeat (a fresh process): steps of one process share its state
(allocator, clocks, placement), so pooling them as if independent makes any two runs look
different. Per cell, each repeat is summarised by its median step time, and a change is called
only when two tests agree (asv's rule):
- statistical: Welch's t statistic on the log repeat medians of A and B, with min(n_A, n_B) − 1
  degrees of freedom (stats.welch_ratio: it holds its level with 3 repeats a side, where
  Welch-Satterthwaite's did not), says they differ (p < alpha);
- practical: the ratio B/A (of the geometric means of the repeat medians) is outside the
  threshold (--threshold; else, when both runs ran on machines with a machine profile, the
  profiles' threshold for the workload class, the larger of the two; else 5 %) *and* outside
  the run-to-run spread of repeat medians on either side (the largest
  max/min of one side's repeat medians): a change smaller than the noise between processes of
  one run is no change.
Cells are paired by name (workload, task, environment, batch size, every non-default axis and
option), not by id: an id also holds the runner's version and the worker's environment
variables, which are exactly what must be shown as differing rather than hide the pairing.
Cells whose comparability metadata or timing settings differ (comparability.py: GPU, driver,
power limit, CUDA, framework version, lock hash, image digest, CPU model, the runner's version,
the worker's and the inherited environment variables, steps, warm-up, min and max time, ...)
are never merged into a verdict: they are "not comparable", naming the keys. So are cells with
fewer than three repeats or too few samples on a side.

Per environment, the stack is compared as a whole first (pyperf refuses to mix incomparable
runs): the lock hash or image digest and id, the installed distributions (each one that changed
named: numpy 2.4.6 → 1.26.4), the driver, the GPU model and its power limit, the runner's version
and the environment variables the matrix set. Every row of an environment whose stack differs is
marked, whatever its cells' verdicts.

`--environments ENV_A ENV_B` compares environment ENV_A of run A with ENV_B of run B (the same
run folder may be given twice): two stacks measured side by side, e.g. one framework at two
versions, judged cell by cell as two runs are.

Exit code: 1 when any cell got significantly slower (usable in CI), else 0; 2 for bad input.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

from rich.console import JustifyMethod

from ...errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, one_line, user_text
from ...machine.profile import compare_threshold
from ...worker.protocol import write_text_atomic
from ..data.store import Store
from ..data.types import CellSummary, Manifest, Record
from .comparability import SOFTWARE_KEYS, StackComparison, compare_stacks, differences
from .stats import repeat_medians, welch_ratio
from .summaries import cell_summaries

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
MIN_SAMPLES = 5
MIN_REPEATS = 3          # fewer: no test both holds its level and sees a change (stats)

FASTER, SLOWER, SAME, NOT_COMPARABLE = "faster", "slower", "same", "not comparable"


@dataclass
class CellComparison:
    cell_id: str
    cell_name: str
    label: str
    batch_size: int | None
    environment: str
    verdict: str
    reason: str = ""
    median_a_ms: float | None = None
    median_b_ms: float | None = None
    samples_a: int = 0
    samples_b: int = 0
    ratio: float | None = None           # B / A, geometric means of the repeat medians
    p_value: float | None = None         # Welch's t-test on log repeat medians, two-sided
    spread: float | None = None          # run-to-run spread of repeat medians (max/min - 1)
    threshold: float | None = None       # the practical threshold this cell was judged with
    differing_keys: list[str] = field(default_factory=list)
    stack_differs: bool = False          # its environment ran on different stacks in A and B


@dataclass
class Comparison:
    run_a: Path
    run_b: Path
    threshold: float
    alpha: float
    cells: list[CellComparison]
    stacks: list[StackComparison] = field(default_factory=list)
    threshold_source: str = ""           # where the threshold came from (choose_threshold)

    @property
    def different_stacks(self) -> list[StackComparison]:
        return [s for s in self.stacks if s.differs]

    @property
    def comparable(self) -> list[CellComparison]:
        return [c for c in self.cells if c.verdict != NOT_COMPARABLE]

    @property
    def geometric_mean_ratio(self) -> float | None:
        """Geometric mean of B/A over comparable cells (the one fair average of ratios)."""
        ratios = [c.ratio for c in self.comparable if c.ratio]
        if not ratios:
            return None
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    def count(self, verdict: str) -> int:
        return sum(1 for c in self.cells if c.verdict == verdict)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED_CELLS if self.count(SLOWER) else EXIT_OK


def open_run(path: Path) -> tuple[Store, Manifest]:
    """A run folder's store and manifest, read only (nothing is created in either run)."""
    if not path.is_dir():
        raise UsageError(f"{path}: no such run folder")
    if not (path / "manifest.json").is_file() or not (path / "cells").is_dir():
        raise UsageError(f"{path}: not a run folder (needs manifest.json and cells/)")
    store = Store.open(path, lock=False, create_folders=False)
    return store, store.read_manifest()


def readable_records(store: Store, manifest: Manifest | None = None) -> list[Record]:
    """The run's valid records (of the cells its manifest lists); every file that is not one is
    named on stderr (never skipped without a word)."""
    records, unreadable = store.read_records(manifest)
    for path, problem in unreadable:
        print(f"warning: {one_line(f'{path}: {problem}; not compared')}", file=sys.stderr)
    return records


def paired(records: list[Record], environment: str, label: str, run: Path) -> list[Record]:
    """--environments: the records of one environment, named `label` (environment and cell
    name), so that they pair with the other side's; UsageError when the run has none."""
    out = []
    for record in records:
        if record["environment"] == environment:
            name = str(record["cell_name"]).replace(f"-{environment}-", f"-{label}-", 1)
            renamed = record.copy()
            renamed["environment"], renamed["cell_name"] = label, name
            out.append(renamed)
    if not out:
        found = sorted({r["environment"] for r in records})
        raise UsageError(f"{run}: no record of environment {environment!r} (it has "
                         f"{', '.join(found) or 'none'})")
    return out


def _samples(records: list[Record]) -> list[float]:
    return [s for r in records for s in r.get("samples_ms") or []]


def repeat_test(medians_a: list[float],
                medians_b: list[float]) -> tuple[float | None, float | None, float]:
    """(ratio B/A, two-sided p of Welch's t-test on the logs, run-to-run spread): the ratio and
    test of stats.welch_ratio (the one used by the effects too), from 2 repeats per side."""
    estimate = welch_ratio(medians_b, medians_a, min_repeats=MIN_REPEATS)
    spread = max(max(m) / min(m) for m in (medians_a, medians_b)) - 1
    return estimate.ratio, estimate.p_value, spread


def compare_cell(summary_a: Mapping[str, Any] | None, summary_b: Mapping[str, Any] | None,
                 records_a: list[Record], records_b: list[Record],
                 threshold: float, alpha: float, compared: tuple[str, ...] = ()) -> CellComparison:
    """B's cell against A's; `compared`: comparability keys that differ on purpose."""
    base = summary_b or summary_a
    if base is None:
        raise ValueError("compare_cell: neither run has the cell")
    out = CellComparison(cell_id=base["cell_id"], cell_name=base["cell_name"], label=base["label"],
                         batch_size=base.get("batch_size"), environment=base["environment"],
                         verdict=NOT_COMPARABLE)
    if summary_a is None or summary_b is None:
        out.reason = f"only in run {'B' if summary_a is None else 'A'}"
        return out
    ok_a = [r for r in records_a if r["status"] == "ok"]
    ok_b = [r for r in records_b if r["status"] == "ok"]
    samples_a, samples_b = _samples(ok_a), _samples(ok_b)
    out.median_a_ms, out.median_b_ms = summary_a.get("median_ms"), summary_b.get("median_ms")
    out.samples_a, out.samples_b = len(samples_a), len(samples_b)
    if not ok_a or not ok_b:
        out.reason = f"status A {summary_a['status']}, B {summary_b['status']}"
        return out
    differ = {key: change for key, change in differences(ok_a, ok_b).items()
              if key not in compared}
    out.differing_keys = list(differ)
    medians_a, medians_b = repeat_medians(ok_a), repeat_medians(ok_b)
    out.ratio = welch_ratio(medians_b, medians_a).ratio
    if differ:
        out.reason = "metadata or settings differ: " + ", ".join(
            f"{key} {change}" for key, change in differ.items())
        return out
    if min(len(samples_a), len(samples_b)) < MIN_SAMPLES:
        out.reason = f"too few samples ({len(samples_a)} vs {len(samples_b)}, need {MIN_SAMPLES})"
        return out
    if min(len(medians_a), len(medians_b)) < MIN_REPEATS:
        out.reason = (f"too few repeats ({len(medians_a)} vs {len(medians_b)}, need "
                      f"{MIN_REPEATS} per side: with fewer, no test both holds its level and "
                      "sees a change)")
        return out
    flagged = [side for side, s in (("A", summary_a), ("B", summary_b)) if s.get("warnings")]
    if flagged:  # the verdict stands, but say that its inputs were already flagged
        out.reason = f"caution: warnings in {' and '.join(flagged)} (see report.md)"
    out.threshold = threshold
    ratio, p_value, out.spread = repeat_test(medians_a, medians_b)
    if ratio is None or p_value is None:     # two repeats a side, each positive: never here
        return out
    out.ratio, out.p_value = ratio, p_value
    significant = p_value < alpha
    margin = max(threshold, out.spread)
    if significant and out.ratio > 1 + margin:
        out.verdict = SLOWER
    elif significant and out.ratio < 1 / (1 + margin):
        out.verdict = FASTER
    else:
        out.verdict = SAME
        if significant and abs(math.log(out.ratio)) > math.log(1 + threshold):
            note = f"within the run-to-run spread ({out.spread * 100:.0f} %)"
            out.reason = f"{out.reason}; {note}" if out.reason else note
    return out


def pairing_keys(summaries: list[CellSummary]) -> dict[str, str]:
    """cell id → what pairs it with a cell of the other run: its name (the id only where two
    cells of one run share a name, which a run made from one matrix never has)."""
    names = Counter(s["cell_name"] for s in summaries)
    return {s["cell_id"]: s["cell_name"] if names[s["cell_name"]] == 1
            else f"{s['cell_name']}#{s['cell_id']}" for s in summaries}


def choose_threshold(given: float | None, manifest_a: Manifest,
                     manifest_b: Manifest) -> tuple[Callable[[str | None], float], str]:
    """The practical threshold per workload class, and where it comes from: --threshold when
    given; else, when both runs ran on machines with a profile (`runner doctor --measure`), the
    larger of the two machines' thresholds for the class; else the fixed DEFAULT_THRESHOLD."""
    if given is not None:
        return (lambda workload: given), f"--threshold {given * 100:g} %"
    profiles = [m.get("machine_profile") for m in (manifest_a, manifest_b)]
    missing = [side for side, p in zip("AB", profiles, strict=True) if not (p or {}).get("found")]
    if missing:
        return ((lambda workload: DEFAULT_THRESHOLD),
                f"the fixed {DEFAULT_THRESHOLD * 100:g} %: run {' and '.join(missing)} ran on a "
                "machine without a profile (python -m runner doctor --measure MATRIX)")
    return ((lambda workload: compare_threshold(profiles[0], profiles[1], workload,
                                                DEFAULT_THRESHOLD)[0]),
            "the machine profiles (the larger of A's and B's, per workload class)")


def compare_runs(run_a: Path, run_b: Path, threshold: float | None = None,
                 alpha: float = DEFAULT_ALPHA,
                 environments: tuple[str, str] | None = None) -> Comparison:
    if (threshold is not None and not 0 <= threshold < math.inf) or not 0 < alpha < 1:
        raise UsageError(f"--threshold must be ≥ 0 and --alpha in (0, 1) (got {threshold}, "
                         f"{alpha})")
    sides, all_records, manifests = [], [], []
    for index, path in enumerate((run_a, run_b)):
        store, manifest = open_run(path)
        manifests.append(manifest)
        records = readable_records(store, manifest)
        if environments is not None:
            records = paired(records, environments[index], " → ".join(environments), path)
        all_records.append(records)
        summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])])
        key = pairing_keys(summaries)
        by_cell: dict[str, list[Record]] = {}
        for record in records:          # one pass: a run of 10 000 cells is not quadratic
            by_cell.setdefault(record["cell_id"], []).append(record)
        sides.append(({key[s["cell_id"]]: s for s in summaries},
                      {key[s["cell_id"]]: by_cell.get(s["cell_id"], []) for s in summaries}))
    (sum_a, rec_a), (sum_b, rec_b) = sides
    threshold_of, source = choose_threshold(threshold, *manifests)
    stacks = compare_stacks(*all_records)
    differing = {s.environment for s in stacks if s.differs}
    order = list(sum_a) + [name for name in sum_b if name not in sum_a]
    cells = []
    for name in order:
        a, b = sum_a.get(name), sum_b.get(name)
        if all(s is None or s["status"] == "not_applicable" for s in (a, b)):
            continue  # nothing was measured on either side
        side = b if b is not None else a
        workload = side.get("workload") if side is not None else None
        cell = compare_cell(a, b, rec_a.get(name, []), rec_b.get(name, []),
                            threshold_of(workload), alpha, SOFTWARE_KEYS if environments else ())
        cell.stack_differs = cell.environment in differing
        cells.append(cell)
    used = [c.threshold for c in cells if c.threshold is not None]
    return Comparison(run_a, run_b, max(used) if used else threshold_of(None), alpha, cells,
                      stacks, source)


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


def summary_line(comparison: Comparison) -> str:
    gm = comparison.geometric_mean_ratio
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in (FASTER, SLOWER, SAME, NOT_COMPARABLE))
    mean = (f"geometric mean of B/A over {len(comparison.comparable)} comparable cells: "
            f"{gm:.3f}" if gm is not None else "no comparable cells")
    differ = comparison.different_stacks
    stacks = (f"; {len(differ)} of {len(comparison.stacks)} environments on different stacks "
              f"({', '.join(s.environment for s in differ)})" if differ else "")
    return f"{counts}; {mean}{stacks}"


def stack_mark(cell: CellComparison) -> str:
    return "differs" if cell.stack_differs else "same"


def markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [f"# Compare: `{c.run_b}` (B) against `{c.run_a}` (A)", "",
             f"Ratio = B ÷ A of the geometric means of the repeat medians (below 1: B faster). "
             f"A cell is faster or slower only when Welch's t-test on the log repeat medians (the "
             f"repeat, a fresh process, is the independent unit) gives p < {c.alpha:g} **and** "
             f"the ratio is beyond both the threshold ({c.threshold_source}; up to "
             f"{c.threshold * 100:g} %) and the run-to-run spread of repeat medians.", "",
             f"**{summary_line(c)}**", "",
             "## Stacks", "",
             "Per environment: the lock hash or image digest and id, the installed "
             "distributions, the driver, the GPU model and its power limit, the runner's version "
             "and the environment variables the matrix set, of A against B.", "",
             "| Environment | Stack |", "|---|---|"]
    for stack in c.stacks:
        text = stack.describe()
        lines.append(f"| {stack.environment} | {text if stack.same else f'**{text}**'} |")
    lines += ["", "## Cells", "",
              "| Workload (task) | Batch size | Environment | Stack | A ms | B ms | B/A | p | "
              "Verdict | Note |",
              "|---|---:|---|---|---:|---:|---:|---:|---|---|"]
    for cell in c.cells:
        verdict = f"**{cell.verdict}**" if cell.verdict in (FASTER, SLOWER) else cell.verdict
        stack_text = "**differs**" if cell.stack_differs else "same"
        lines.append(f"| {cell.label} | {cell.batch_size} | {cell.environment} | {stack_text} | "
                     f"{_fmt(cell.median_a_ms, '.4g')} | {_fmt(cell.median_b_ms, '.4g')} | "
                     f"{_fmt(cell.ratio, '.3f')} | {_fmt(cell.p_value, '.2g')} | {verdict} | "
                     f"{cell.reason} |")
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
                      _fmt(cell.median_a_ms, ".4g"), _fmt(cell.median_b_ms, ".4g"),
                      _fmt(cell.ratio, ".3f"), _fmt(cell.p_value, ".2g"), verdict,
                      user_text(cell.reason))
    table.caption = (f"B/A: ratio of repeat medians; p: Welch's t-test on log repeat medians "
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


def run_compare(run_a: Path, run_b: Path, threshold: float | None, alpha: float,
                markdown_path: Path | None, console,
                environments: tuple[str, str] | None = None) -> int:
    """The `compare` subcommand: tables on the terminal, Markdown to a file, exit code.
    threshold None: from the runs' machine profiles (choose_threshold)."""
    comparison = compare_runs(run_a, run_b, threshold, alpha, environments)
    console.print(stack_table(comparison))
    console.print(terminal_table(comparison))
    console.print(user_text(summary_line(comparison)), soft_wrap=True)
    console.print(f"threshold: {user_text(comparison.threshold_source)}", soft_wrap=True,
                  style="yellow" if "without a profile" in comparison.threshold_source else None)
    target = markdown_path or run_b / f"compare-{run_a.resolve().name}.md"
    write_text_atomic(target, markdown(comparison))
    console.print(f"compare: {user_text(str(target))}", soft_wrap=True)
    return comparison.exit_code
