"""The A/B table (`runner ab`): B ÷ A per cell with its 95 % interval and the smallest change the
test would have seen, as the Markdown a contributor pastes into a pull request (ab.md in the run
folder, and printed). Formatting only: results/analysis/ab.py made every figure."""

from __future__ import annotations

from ..analysis.ab import PairRow, PairTable, machine, machine_text
from ..analysis.report_model import Ratio
from ..formatting import fmt, md_text, percent

NAME = "ab.md"


def ratio_text(ratio: Ratio) -> str:
    """1.21× (1.17–1.25), or the ratio and why it has no interval."""
    if ratio.ratio is None:
        return "–"
    if ratio.low is None or ratio.high is None:
        return f"{ratio.ratio:.3f}× ({md_text(ratio.why or 'no interval')})"
    return f"{ratio.ratio:.3f}× ({ratio.low:.3f}–{ratio.high:.3f})"


def verdict_text(row: PairRow) -> str:
    return f"**{row.verdict}**" if row.verdict in ("slower", "faster") else row.verdict


def table_lines(table: PairTable) -> list[str]:
    a, b = md_text(table.a.environment), md_text(table.b.environment)
    lines = [f"| Workload (task) | Batch | {a} ms | {b} ms | {b} ÷ {a} (95 % interval) | "
             "Could have seen | Verdict |", "|---|---:|---:|---:|---|---:|---|"]
    for row in table.rows:
        lines.append(f"| {md_text(row.label)} | {row.batch_size or '–'} | {fmt(row.time_a_ms)} | "
                     f"{fmt(row.time_b_ms)} | {ratio_text(row.ratio)} | "
                     f"{percent(row.detectable)} | {verdict_text(row)} |")
    if len(table.rows) > 1:
        lines.append(f"| **Geometric mean** | | | | {ratio_text(table.overall)} | | |")
    return lines


def notes(table: PairTable) -> list[str]:
    a, b = md_text(table.a.environment), md_text(table.b.environment)
    repeats = sorted({n for row in table.rows for n in row.repeats})
    out = [f"- Stack of {b} against {a}: {md_text('; '.join(table.stack) or 'the same distributions')}",
           f"- Machine: {md_text(machine_text(machine([*table.a.records, *table.b.records])))}",
           f"- Each cell × repeat in a fresh process, {'–'.join(map(str, repeats))} repeats a "
           "side, the two sides' processes interleaved in pairs (A B B A …); a time is the "
           "geometric mean of the repeats' median step times.",
           "- The interval: Welch's t on the logarithms of the repeat medians with min(n_A, n_B) − 1 "
           "degrees of freedom. *Could have seen*: the smallest change the test detects with "
           "80 % power at these repeats and spread. A verdict needs the test and the practical "
           f"threshold ({md_text(table.threshold_source)}) to agree."]
    for row in table.rows:
        if row.verdict == "not comparable" or "caution" in row.reason:
            out.append(f"- {md_text(row.label)}, batch {row.batch_size}: {md_text(row.reason)}")
    for side, cells in ((a, table.only_a), (b, table.only_b)):
        if cells:
            out.append(f"- Only in {side}: {md_text(', '.join(cells))}")
    return out


def markdown(table: PairTable) -> str:
    mean = "geometric mean " if len(table.rows) > 1 else ""
    title = (f"### {md_text(table.b.environment)} ÷ {md_text(table.a.environment)}: {mean}"
             f"{ratio_text(table.overall)}")
    return "\n".join([title, "", *table_lines(table), "", *notes(table), ""])
