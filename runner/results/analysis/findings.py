"""Findings in words: the short list of sentences report.md opens with, generated from the effects
and the answer check. Every sentence carries its number and its 95 % interval; an interval that
covers 1 is said to be "not distinguishable from noise", a ratio without an interval says why it
has none, and a count of "fastest" rows says in how many the lead is beyond noise. Nothing is
claimed that the statistics do not support.

The section answers first, in at most ANSWER_BULLETS bullets, what a reader opens it for: which
environment is fastest here, by how much, and whether this run can tell (said once, with the
setting that would, when too few repeats leave the ratios without an interval); the rest follows
grouped by kind (Findings.groups).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...worker.catalog import is_hub
from ..data.types import CellSummary
from ..formatting import fmt, md_code, md_text
from . import answers
from .effects import BETWEEN_ENVIRONMENTS, PER_ITEM_FACTORS, Analysis, EffectTable, fastest, shown
from .ratios import Ratio
from .speedups import ranked
from .stats import MIN_CI_REPEATS
from .summaries import TF32_MARK, TIME_KEY, pivot, table_group, tf32_rows

ROWS_IN_FULL = 2          # a value with this many rows or fewer gets one sentence per row
FASTEST_SHOWN = 3         # environments named in the "fastest in k of n rows" sentences
ANSWER_BULLETS = 5        # the answer the Findings open with: at most this many bullets
ANSWERS = "The answer check"   # the group of the same-answer check's sentences


@dataclass(frozen=True)
class Findings:
    """The Findings section: its answer (which is fastest here, by how much, can this run
    tell; at most ANSWER_BULLETS sentences), then the rest as (kind, sentences) groups."""

    answer: list[str] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sentences)

    @property
    def sentences(self) -> list[str]:
        return self.answer + [sentence for _, said in self.groups for sentence in said]


def speed_words(estimate: Ratio, said: bool = False) -> str:
    """'8.10× faster (95 % CI 7.60–8.60)', '1.25× slower (…) — not distinguishable from noise',
    or the ratio with "(no interval)" (repeat_sentences says why, once; `said`: the findings
    said that no ratio has one, so the ratio alone)."""
    ratio, low, high = estimate.ratio, estimate.low, estimate.high
    if ratio is None:                   # callers give rows that have one
        return estimate.why or "no ratio"
    text = ratio_words(ratio)
    if low is None or high is None:
        return text if said else f"{text} (no interval)"
    bounds = (low, high) if ratio >= 1 else (1 / high, 1 / low)
    text += f" (95 % CI {fmt(bounds[0])}–{fmt(bounds[1])})"
    return text if estimate.distinguishable else text + " — not distinguishable from noise"


def ratio_words(ratio: float) -> str:
    """A speed ratio as a reader says it: '8.10× faster' or '1.25× slower', never '0.800×'."""
    return f"{fmt(ratio)}× faster" if ratio >= 1 else f"{fmt(1 / ratio)}× slower"


def _where(effect, factor: str) -> str:
    batch = f", batch {effect.batch_size}" if factor != "batch_size" else ""
    on = "" if factor in BETWEEN_ENVIRONMENTS else f" on {effect.environment}"
    return md_text(f"{effect.label}{batch}{on}")


def _subject(table: EffectTable, value: Any) -> str:
    if table.factor in BETWEEN_ENVIRONMENTS:
        changed = f" ({table.changes[value]})" if value in table.changes else ""
        return md_text(f"{value}{changed} against {table.baseline}")
    per = " (per item)" if table.factor in PER_ITEM_FACTORS else ""
    return md_text(f"{table.factor} = {shown(value)} against {shown(table.baseline)}{per}")


def table_sentences(table: EffectTable, said: bool = False) -> list[str]:
    """Per value of the factor: one sentence per row when it has few, else the geometric mean
    with how many rows are beyond noise each way and the range (`said`: speed_words')."""
    out = []
    for value in table.values:
        effects = [e for e in table.of(value) if e.in_means]
        if not effects:
            continue
        subject = _subject(table, value)
        if len(effects) <= ROWS_IN_FULL:
            out += [f"{subject}: {speed_words(e.estimate, said)} for "
                    f"{_where(e, table.factor)}." for e in effects]
            continue
        overall, rows = table.overall(value)
        text = f"{subject}: {speed_words(overall, said)}, geometric mean over {rows} rows"
        if any(e.estimate.has_interval for e in effects):
            beyond = [e for e in effects if e.estimate.distinguishable]
            faster = sum(1 for e in beyond if (e.estimate.ratio or 0.0) > 1)
            text += (f"; beyond noise in {len(beyond)} of them ({faster} faster, "
                     f"{len(beyond) - faster} slower)")
        low, high = min(effects, key=_ratio), max(effects, key=_ratio)
        out.append(f"{text}; from {ratio_words(_ratio(low))} "
                   f"({_where(low, table.factor)}) to {ratio_words(_ratio(high))} "
                   f"({_where(high, table.factor)}).")
    return out


def _ratio(effect) -> float:
    return effect.estimate.ratio


@dataclass(frozen=True)
class Win:
    """A row's fastest cell: its environment, the row, the next fastest environment, how many
    times faster than that one (its lead) and whether it is ahead of every other cell beyond
    noise (effects.fastest)."""

    environment: str
    row: str
    next: str
    lead: float
    clear: bool


def row_winners(summaries: list[CellSummary]) -> list[Win]:
    """The winner of each row with two or more environments whose cells agree. Rows whose
    float32 cells ran different arithmetic (TF32 in some, †) are left out: their ranking
    compares other work."""
    environments, rows, grid = pivot(summaries)
    marked = tf32_rows(summaries)
    out = []
    for label, batch in rows:
        if (label, batch) in marked:
            continue
        cells = [grid[(label, batch, e)] for e in environments if (label, batch, e) in grid]
        found = fastest(cells)
        if found is None or found[1] is None:
            continue
        best, runner_up = ranked(cells)[:2]
        out.append(Win(str(best["environment"]), f"{label}, batch {batch}",
                       str(runner_up["environment"]), runner_up[TIME_KEY] / best[TIME_KEY],
                       bool(found[1])))
    return out


def fastest_sentences(summaries: list[CellSummary], what: str = "") -> list[str]:
    """'jax is fastest in 7 of 10 rows (beyond noise in 5)': per environment, the rows where it
    is the fastest of the cells that agree, and in how many it is ahead of every other cell of
    the row beyond noise (effects.fastest)."""
    wins = row_winners(summaries)
    counts = Counter(w.environment for w in wins)
    return [f"{md_text(env)} is fastest in {count} of {len(wins)} rows{what} with two or more "
            f"environments (ahead of every other beyond noise in "
            f"{sum(w.clear for w in wins if w.environment == env)})."
            for env, count in counts.most_common(FASTEST_SHOWN)]


ROWS_NAMED = 2            # an environment's rows named in the answer when it wins this many or fewer


def winner_sentences(summaries: list[CellSummary], room: int, tell: bool = True) -> list[str]:
    """The answer's 'which is fastest here, and by how much', in at most `room` sentences: per
    environment that wins rows (the most first), the rows it wins with its lead over the next
    fastest of each (named when few; else how many, and the geometric mean and range of the
    leads) and (`tell`: the run has intervals) in how many the lead is beyond noise; where
    more environments win rows than there is room, the last sentence names the rest."""
    wins = row_winners(summaries)
    ranking = [env for env, _ in Counter(w.environment for w in wins).most_common()]
    if room <= 0 or not ranking:
        return []
    shown = ranking if len(ranking) <= room else ranking[:room - 1]
    out = [winner_sentence(env, [w for w in wins if w.environment == env], len(wins), tell)
           for env in shown]
    rest = [w for w in wins if w.environment not in shown]
    if rest:
        out.append("Fastest in the other rows: " + "; ".join(
            f"{md_text(w.environment)} in {md_text(w.row)} ({fmt(w.lead)}× ahead of "
            f"{md_text(w.next)})" for w in rest) + ".")
    return out


def winner_sentence(env: str, won: list[Win], rows: int, tell: bool) -> str:
    """One environment's wins, for the answer."""
    if len(won) <= ROWS_NAMED:
        where = "; ".join(f"in {md_text(w.row)}, {fmt(w.lead)}× ahead of {md_text(w.next)}"
                          for w in won)
        text = f"**{md_text(env)}** is fastest {where} ({len(won)} of {rows} rows)"
    else:
        leads = [w.lead for w in won]
        mean = math.exp(statistics.fmean(math.log(v) for v in leads))
        text = (f"**{md_text(env)}** is fastest in {len(won)} of {rows} rows, by {fmt(mean)}× "
                f"over each row's next fastest (geometric mean; from {fmt(min(leads))}× to "
                f"{fmt(max(leads))}×)")
    clear = sum(w.clear for w in won)
    return text + (f"; ahead of every other beyond noise in {clear}." if tell else ".")


def tf32_sentences(summaries: list[CellSummary], analysis: Analysis) -> list[str]:
    """Say once which rows and ratios compare TF32 with full float32 arithmetic."""
    rows = tf32_rows(summaries)
    ratios = sum(1 for t in analysis.tables for e in t.effects if e.tf32_mixed)
    if not rows and not ratios:
        return []
    return [f"{len(rows)} float32 row(s) and {ratios} ratio(s) compare cells that ran their "
            "matmuls or convolutions differently (TF32 tensor cores in some, full float32 or "
            f"not recorded in others): marked {TF32_MARK}, left out of the geometric means and "
            "the fastest counts (`tf32 = true` or `false` in the matrix equalises)."]


def method_sentence(summaries: list[CellSummary]) -> str:
    """How the numbers were made, in one line: the estimator, the intervals, the winners, the
    timed window."""
    blocked = any((s.get("calls_per_sample") or 1) > 1 for s in summaries)
    return ("Method: each repeat is a fresh process whose timed steps are summarised by their "
            "median; a cell's time is the geometric mean of its repeat medians, the one "
            "estimator the tables, their bold, the fastest counts and every ratio use. "
            "Intervals are 95 % t intervals on the logarithms of the repeat medians (Welch's "
            "statistic with min(n) − 1 degrees of freedom, which holds its level at a few "
            "repeats). A cell is fastest beyond noise only when it is ahead of every other cell "
            "of its row, each lead at 95 % with a Bonferroni correction for the cells it is "
            "compared with (never the runner-up alone, which the same noise picked). Python's "
            "garbage collector is off inside every timed window; warm-up steps, the block "
            "calibration and its pre-roll (the same untimed calls in every repeat) are outside "
            "it" + ("; blocked cells' step-to-step spread is between blocks of calls, each "
                    "timed with one device synchronisation." if blocked else ".")
            + fit_sync_clause(summaries))


def fit_sync_clause(summaries: list[CellSummary]) -> str:
    """How the Keras table's fit rows were timed, where the run has them: call by call, each
    step's loss read back to the host, on keras-hub (train_on_batch returns it) and Hugging Face
    (loss.item()) alike; an older run's HF fit cells timed in blocks are named."""
    fits = [s for s in summaries if s["task"] == "fit" and is_hub(s["workload"])
            and table_group(s) is not None and s["status"] == "ok"]
    if not fits:
        return ""
    blocked = [s["cell_name"] for s in fits if (s.get("calls_per_sample") or 1) > 1]
    return (" Fit rows of the Keras table are timed the same way on every side: call by call, "
            "each step's loss read back to the host (Keras' train_on_batch returns it; the "
            "Hugging Face loop calls loss.item())"
            + (f", except {', '.join(blocked)} (timed in blocks: a run made before this rule)"
               if blocked else "") + ".")


def answer_sentences(summaries: list[CellSummary]) -> list[str]:
    ok = [s for s in summaries if s["status"] == "ok"]
    differing = [s for s in ok if s.get("answer_differs")]
    compared = [s for s in ok if s.get("answer_check") in (answers.SAME, *answers.DIFFERING)]
    unchecked = [s for s in ok if s.get("answer_check") == answers.UNCHECKED]
    out = []
    if differing:
        names = ", ".join(md_code(s["cell_name"]) for s in differing[:4])
        more = f" and {len(differing) - 4} more" if len(differing) > 4 else ""
        out.append(f"{len(differing)} of {len(compared)} compared cells computed a different "
                   f"answer from their row ({names}{more}): they are marked "
                   f"{answers.MARK}, left out of the effects' means and never bold (see "
                   "Different answers).")
    elif compared:
        out.append(f"All {len(compared)} cells compared computed the same answer as the rest of "
                   "their row, within the tolerance of their precision.")
    if unchecked:
        out.append(f"Answers not checked for {len(unchecked)} cells (check_answers = false in "
                   "the matrix).")
    return out


def repeat_sentences(analysis: Analysis, profile: str | None = None) -> list[str]:
    """Say once, first, whether the run can tell: why ratios have no interval (too few repeats,
    as a smoke run's one process per cell), and the setting that would give them one."""
    missing = [e for t in analysis.tables for e in t.effects
               if e.estimate.ratio is not None and not e.estimate.has_interval]
    if not missing:
        return []
    total = sum(1 for t in analysis.tables for e in t.effects if e.estimate.ratio is not None)
    where = (f", or `[profiles.{md_text(profile)}] repeats` where the {md_text(profile)} profile "
             "sets it" if profile and profile != "full" else "")
    return [f"**This run cannot tell which is faster beyond noise**: {len(missing)} of {total} "
            f"ratios have no interval — {md_text(missing[0].estimate.why)} — so no lead is "
            f"called beyond noise; `repeats = {MIN_CI_REPEATS}` or more would give each ratio "
            f"its 95 % interval (`[run] repeats`{where})."]


def different_answer_warning(summaries: list[CellSummary]) -> list[str]:
    """The answer's caveat: cells that computed a different answer are never ranked."""
    differing = sum(1 for s in summaries if s["status"] == "ok" and s.get("answer_differs"))
    return [f"{differing} cell(s) computed a different answer from their row and are not "
            f"ranked (marked {answers.MARK}; see Different answers)."] if differing else []


def groups(summaries: list[CellSummary], analysis: Analysis,
           keras_rows: list[CellSummary] | None = None) -> list[tuple[str, list[str]]]:
    """The findings beyond the answer, by kind, most general first. Where no ratio has an
    interval (the answer said so, once) the ratios stand alone; the Keras table's own "fastest"
    counts where it has two rows or more to rank (one is the answer's)."""
    ratios = [e.estimate for t in analysis.tables for e in t.effects if e.estimate.ratio]
    said = bool(ratios) and not any(r.has_interval for r in ratios)
    settings = [s for table in analysis.axes for s in table_sentences(table, said)]
    environments = table_sentences(analysis.environments, said) if analysis.environments else []
    for table in analysis.stacks:
        environments += table_sentences(table, said)
    if keras_rows and len(row_winners(keras_rows)) > 1:
        environments += fastest_sentences(keras_rows, " of the Keras table")
    return [(ANSWERS, answer_sentences(summaries)), ("Settings", settings),
            ("Environments", environments + tf32_sentences(summaries, analysis))]


def arrange(summaries: list[CellSummary], analysis: Analysis,
            kinds: list[tuple[str, list[str]]], profile: str | None = None) -> Findings:
    """The Findings: the answer (can this run tell, which is fastest and by how much, the rows
    left unranked for their answers), at most ANSWER_BULLETS bullets; where no row has two
    environments to rank, the first sentences of the rest take its place. Then every non-empty
    group of `kinds`."""
    answer = repeat_sentences(analysis, profile)
    caveat = different_answer_warning(summaries)
    room = ANSWER_BULLETS - len(answer) - len(caveat)
    winners = winner_sentences(summaries, room, tell=not answer)
    rest = [(kind, said) for kind, said in kinds if said]
    effects = next((i for i, (kind, _) in enumerate(rest) if kind != ANSWERS), None)
    if not winners and effects is not None:    # nothing to rank: the first effects answer
        kind, said = rest[effects]
        winners, rest[effects] = said[:room], (kind, said[room:])
    return Findings(answer + winners + caveat, [(k, said) for k, said in rest if said])


def of(summaries: list[CellSummary], analysis: Analysis,
       keras_rows: list[CellSummary] | None = None,
       more: list[tuple[str, list[str]]] | None = None, profile: str | None = None) -> Findings:
    """The findings of a run: the answer, then groups() and `more` (other analyses' sentences,
    by kind)."""
    return arrange(summaries, analysis, groups(summaries, analysis, keras_rows) + (more or []),
                   profile)
