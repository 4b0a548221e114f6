"""`python -m runner compare BASE NEW --fail-on-regression 10%`: compare as a CI gate
(docs/layers.md "In a framework's CI"). A cell regressed when compare calls it slower at that
threshold — its B/A ratio above 1 + the threshold and above the run-to-run spread, and Welch's
test on the repeat medians saying B is slower (p < alpha: B/A's interval lies above 1) — so noise
never fails a build and a small real change does not either. The regressed cells are printed as
a Markdown table a pull request's comment can take (and written to a file); exit 1 when there is
one, 0 when there is none, 2 when nothing could be judged (no cell comparable: a gate that
judged nothing must not pass silently)."""

from __future__ import annotations

from pathlib import Path

from ...errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, one_line, user_text
from ...worker.protocol import write_text_atomic
from ..analysis.comparison import SLOWER, CellComparison, Comparison, compare_runs
from ..formatting import fmt, md_text


def parse_percent(text: str) -> float:
    """'10%' or '10' → 0.10 (a percent, as the option reads); ValueError otherwise."""
    value = float(text.strip().removesuffix("%"))
    if not 0 <= value < 1000:
        raise ValueError(f"{text!r}: expected a percent from 0 to 1000, e.g. 10%")
    return value / 100.0


def regressions(comparison: Comparison) -> list[CellComparison]:
    """The cells compare called slower, the largest ratio first."""
    return sorted((c for c in comparison.cells if c.verdict == SLOWER),
                  key=lambda c: -(c.ratio or 0.0))


def markdown(comparison: Comparison, threshold: float) -> str:
    """The PR comment: a line of verdict, then the regressed cells' table (none: the line)."""
    found = regressions(comparison)
    judged = len(comparison.comparable)
    head = (f"**{len(found)} of {judged} compared cells regressed by more than "
            f"{threshold * 100:g} %** (B = {md_text(comparison.run_b.name)} against A = "
            f"{md_text(comparison.run_a.name)}; slower beyond the threshold, the run-to-run "
            f"spread and Welch's test on the repeat medians, p < {comparison.alpha:g}).")
    if not found:
        return head + "\n"
    lines = [head, "", "| Cell | Batch size | Environment | A ms | B ms | B/A | p |",
             "|---|---:|---|---:|---:|---:|---:|"]
    lines += [f"| {md_text(c.label)} | {c.batch_size} | {md_text(c.environment)} | "
              f"{fmt(c.time_a_ms)} | {fmt(c.time_b_ms)} | {fmt(c.ratio)} | "
              f"{fmt(c.p_value, 2)} |" for c in found]
    return "\n".join(lines) + "\n"


def run_gate(run_a: Path, run_b: Path, threshold: float, alpha: float, console,
             markdown_path: Path | None = None,
             environments: tuple[str, str] | None = None) -> int:
    """The gate: the Markdown on the terminal and in a file (default
    RUN_B/regressions-<A>.md), and the exit code."""
    comparison = compare_runs(run_a, run_b, threshold, alpha, environments)
    if not comparison.comparable:
        reasons = sorted({c.reason for c in comparison.cells})[:3]
        raise UsageError(f"compare --fail-on-regression: no cell of {run_b} compares with "
                         f"{run_a} ({'; '.join(reasons) or 'no cell in common'}): nothing was "
                         "judged")
    text = markdown(comparison, threshold)
    target = markdown_path or run_b / f"regressions-{run_a.resolve().name}.md"
    write_text_atomic(target, text)
    # Markdown as it is (markup off): each line without control characters.
    console.print("\n".join(one_line(line) for line in text.splitlines()), soft_wrap=True,
                  markup=False, highlight=False)
    console.print(f"compare: {user_text(str(target))}", soft_wrap=True)
    return EXIT_FAILED_CELLS if regressions(comparison) else EXIT_OK
