"""The report model: what a run's records say, computed once per report and handed to every
renderer (the terminal tables, report.md and its parts; report.html renders report.md), which
only format it. Each field says which analysis made it; a renderer reads fields and never calls
that analysis again (tests/results/analysis/test_report_model.py: one call per report).

A run is analysed once (analyse_run, at the end): its records read and checked, summarised,
their answers checked, and this model built over them; the report writer (render/write.py)
and the history import (history/ingest.py) both take that one analysis.

This module is the renderers' one door to the analysis: render/ imports nothing else of
analysis/ but the other outputs' own models (comparison, ab, issue), and takes from here only
what `__all__` names (tests/test_layout.py): the model, its parts' types, and the words, marks,
limits and small texts a table, heading or note needs, re-exported from where each is
defined."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..data.profiles import read_profiles
from ..data.store import Store
from ..data.types import CellSummary, Manifest, Record
from ..formatting import md_text
from . import answers, cost, effects, findings, layers, native, reference, stack_diff
from .answers import AnswerCheck
from .conditions import to_act_on
from .decoding import keras_titles
from .effects import Analysis
from .findings import Findings
from .keras_table import keras_view
from .layers import Layers
from .native import KerasView, NativeRatio
from .profiles import Profiled, biggest_gap, judge_rows, rows_of
from .ratios import Ratio
from .scaling import ScalingRow, scaling_rows
from .speedups import keras_speedups, speedup
from .tiers import TierPair, batch_searched_ids, ranking_changes, tier_pairs
from .summaries import cell_summaries, fixed_costs, pivot, tf32_rows

# --- what the renderers read beside the model (re-exported; `__all__` lists them) ----------
from .answers import (ALONE as ANSWER_ALONE, DIFFERENT as ANSWER_DIFFERENT,
                      DIFFERENT_WORK as ANSWER_DIFFERENT_WORK, MARK as ANSWER_MARK,
                      NO_MAJORITY as ANSWER_NO_MAJORITY, NOT_RECORDED as ANSWER_NOT_RECORDED,
                      NOTE as ANSWER_NOTE, SAME as ANSWER_SAME, TOLERANCES as ANSWER_TOLERANCES,
                      UNCHECKED as ANSWER_UNCHECKED)
from .conditions import (KINDS as CONDITION_KINDS, TITLES as CONDITION_TITLES,
                         Kind as ConditionKind, kind_of as condition_kind_of)
from .cost import label as cost_label
from .decoding import markdown_lines as first_token_lines, ttft_text
from .effects import BETWEEN_ENVIRONMENTS, EffectTable, shown
from .layers import KerasTax, LayerRow, mean_taxes, memory_key
from .native import markdown_lines as keras_over_native_lines, ratio_cell
from .profiles import TOP_OPS, ProfiledRow, category_ms, top_ops
from .quantized import TOLERANCES as QUANTIZED_TOLERANCES, bytes_ratio
from .reference import (COLUMNS as REFERENCE_COLUMNS, TITLES as REFERENCE_TITLES,
                        published as published_table)
from .scaling import (DIFFERENT as SCALING_DIFFERENT, SAME as SCALING_SAME, SUPERLINEAR_NOTE,
                      Point as ScalingPoint, efficiency_text, findings as scaling_findings,
                      superlinear, without_interval)
from .stats import CV_LIMIT, MIN_CI_REPEATS, MIN_WINDOW_S
from .summaries import AXIS_KEYS, TF32_MARK, TF32_NOTE, TIME_KEY
from .tiers import (BATCH_KNOB as TIER_BATCH_KNOB, NO_GAIN as TIER_NO_GAIN,
                    SLOWER as TIER_SLOWER, knobs_text)

# What a renderer may take of this module (tests/test_layout.py holds render/ to it). The
# builders (analyse_run, build, table_view, quantized_cells) are not offered: a run is analysed
# before anything is rendered (the pipeline, `report`, the history import call them).
__all__ = [
    # the model and its parts
    "ReportModel", "TableView", "Quantized", "RunAnalysis", "Row", "GridKey", "Analysis",
    "EffectTable", "Layers", "KerasTax", "LayerRow", "Profiled", "ProfiledRow", "Ratio",
    "ScalingRow", "ScalingPoint", "TierPair",
    # the summaries' keys and marks
    "AXIS_KEYS", "TIME_KEY", "TF32_MARK", "TF32_NOTE",
    # the same-answer check's words
    "ANSWER_ALONE", "ANSWER_DIFFERENT", "ANSWER_DIFFERENT_WORK", "ANSWER_MARK",
    "ANSWER_NO_MAJORITY", "ANSWER_NOT_RECORDED", "ANSWER_NOTE", "ANSWER_SAME",
    "ANSWER_TOLERANCES", "ANSWER_UNCHECKED",
    # warnings, statistics and effects
    "CONDITION_KINDS", "CONDITION_TITLES", "ConditionKind", "condition_kind_of", "CV_LIMIT",
    "MIN_CI_REPEATS", "MIN_WINDOW_S", "BETWEEN_ENVIRONMENTS", "shown",
    # the sections' own words and small texts
    "cost_label", "first_token_lines", "ttft_text", "keras_over_native_lines", "ratio_cell",
    "mean_taxes", "memory_key", "TOP_OPS", "category_ms", "top_ops", "QUANTIZED_TOLERANCES",
    "bytes_ratio", "REFERENCE_COLUMNS", "REFERENCE_TITLES", "published_table",
    "SCALING_DIFFERENT", "SCALING_SAME", "SUPERLINEAR_NOTE", "efficiency_text",
    "scaling_findings", "superlinear", "without_interval", "TIER_NO_GAIN", "TIER_SLOWER",
    "TIER_BATCH_KNOB", "knobs_text",
]

Row = tuple[str, int]                      # (row label, batch size)
GridKey = tuple[str, int, str]             # (row label, batch size, environment)


@dataclass(frozen=True)
class TableView:
    """One table of rows × environments and what stands beside its values."""

    summaries: list[CellSummary]
    environments: list[str]                # the columns, in order
    rows: list[Row]
    grid: dict[GridKey, CellSummary]       # summaries.pivot
    titles: dict[str, str]                 # column headings ({}: the environments' names)
    tf32_rows: set[Row]                    # summaries.tf32_rows: TF32 differs in the row (†)
    speedups: dict[Row, dict[str, Any]]    # keras_speedups: best Keras 3 over Keras 2
    natives: list[str]                     # native columns' titles (the Keras table's)
    native_ratios: dict[Row, dict[str, NativeRatio]]   # best Keras 3 ÷ each native column
    flagged: set[GridKey]                  # conditions.to_act_on: cells to look at
    flagged_cells: int                     # how many of `summaries` that is


def table_view(summaries: list[CellSummary], columns: list[str] | None = None,
               titles: dict[str, str] | None = None,
               ratios: Sequence[NativeRatio] = (),
               speedups: dict[Row, dict[str, Any]] | None = None) -> TableView:
    """The view of a table of `summaries` (columns in `columns` order, headed by `titles`);
    `ratios` (native.keras_over_native) give the Keras table its native columns; `speedups`:
    keras_speedups(summaries) where the caller has them."""
    environments, rows, grid = pivot(summaries)
    view: KerasView | None = (summaries, columns or environments, titles) if titles else None
    return TableView(summaries, columns or environments, rows, grid, titles or {},
                     tf32_rows(summaries),
                     keras_speedups(summaries) if speedups is None else speedups,
                     native.native_titles(view), native.best_of(ratios) if view else {},
                     {key for key, cell in grid.items() if to_act_on(cell)},
                     sum(1 for s in summaries if to_act_on(s)))


@dataclass(frozen=True)
class Quantized:
    """A quantized cell, the float cell of its row (None: not in the run) and its speedup."""

    cell: CellSummary
    base: CellSummary | None
    speedup: Ratio | None


@dataclass(frozen=True)
class ReportModel:
    """A run's report as data: every renderer's one input."""

    manifest: Manifest
    summaries: list[CellSummary]
    analysis: Analysis | None              # effects.analyse (None: a report without effects)
    keras: KerasView | None                # keras_view: the Keras 3 study's table
    keras_table: TableView | None          # that table (Keras 3 speedups, native columns)
    cells_table: TableView                 # every cell
    speedups: dict[Row, dict[str, Any]]    # keras_speedups of every cell
    native: list[NativeRatio]              # native.keras_over_native(keras)
    column_titles: dict[str, str]          # cell id → its Keras table column's title
    findings: Findings                     # the Findings: the answer, then the rest by kind
    method: str                            # findings.method_sentence ("": no cell)
    scaling: list[ScalingRow]              # scaling.scaling_rows
    fixed_costs: list[dict[str, Any]]      # summaries.fixed_costs
    published: list[dict[str, Any]]        # reference.beside
    price: dict[str, Any] | None           # cost.price_of(manifest)
    quantized: list[Quantized]
    left_out: list[tuple[str, str]]        # (record file, why): not in the report
    profiled: Profiled | None = None       # the run's profiles, by row, and their plots
    tiers: list[TierPair] = field(default_factory=list)     # tiers.tier_pairs
    ledger_fault: str | None = None        # why the run's ledger vouches for nothing
    layers: Layers | None = None                             # layers.layers_of


def quantized_cells(summaries: list[CellSummary]) -> list[Quantized]:
    names = {s["cell_name"]: s for s in summaries}
    out = []
    for s in summaries:
        if s["status"] == "ok" and s.get("quantization"):
            base = names.get(s.get("quantization_base") or "")
            out.append(Quantized(s, base, speedup(base, s) if base is not None else None))
    return out


def sentences(summaries: list[CellSummary], analysis: Analysis | None,
              keras: KerasView | None, ratios: list[NativeRatio],
              profiled: Profiled | None, tiers: list[TierPair],
              layer_cells: Layers | None = None, profile: str | None = None) -> Findings:
    """The Findings section (none without the effects' analysis): its answer, then the rest by
    kind."""
    if analysis is None:
        return Findings()
    gap = biggest_gap(profiled.rows) if profiled else None
    # Headings unlike the sections' own (## Layers, ## Cost, ...): the kinds of sentence.
    more = [("Keras over native", native.sentences(ratios)),
            ("The layer family", layers.sentences(layer_cells)),
            ("Price per item", cost.sentences(summaries)), ("Tuning", ranking_changes(tiers)),
            ("Per-op profiles", [f"Where the time goes: {md_text(gap)}"] if gap else [])]
    return findings.of(summaries, analysis, keras[0] if keras else None, more, profile)


def build(manifest: Manifest, summaries: list[CellSummary], analysis: Analysis | None = None,
          left_out: list[tuple[str, str]] | None = None,
          profiled: Profiled | None = None) -> ReportModel:
    """The report of `summaries`: every analysis its renderers show, each made once."""
    tiers = tier_pairs(summaries, manifest)
    # A tuned cell whose batch was searched compares in items/s in its own section only.
    searched = batch_searched_ids(manifest)
    timed = [s for s in summaries if s["cell_id"] not in searched]
    keras = keras_view(timed)
    if profiled is not None:
        judge_rows(profiled, summaries)
    ratios = native.keras_over_native(keras)
    speedups = keras_speedups(timed)
    # The time table's speedup columns: its own unless the Keras table has them.
    cells = table_view(timed, speedups=speedups if keras is None else {})
    layer_cells = layers.layers_of(summaries)
    return ReportModel(
        manifest, summaries, analysis, keras,
        table_view(keras[0], keras[1], keras[2], ratios) if keras else None, cells, speedups,
        ratios, keras_titles(keras),
        sentences(timed, analysis, keras, ratios, profiled, tiers, layer_cells,
                  manifest.get("profile")),
        findings.method_sentence(summaries) if summaries else "", scaling_rows(summaries),
        fixed_costs(summaries), reference.beside(summaries), cost.price_of(manifest),
        quantized_cells(summaries), left_out or [], profiled, tiers, layers=layer_cells)


# --- a run analysed once: its reports and its history from one reading ------------------------

@dataclass(frozen=True)
class RunAnalysis:
    """A run folder read once and analysed once (analyse_run): what its reports show (`report`)
    and what its history keeps (the records, their digests, the summaries). The report writer
    (render/write.py) and the history import (history/ingest.py) both take it, so a run is
    never read or summarised twice, and its report and its history never disagree."""

    manifest: Manifest
    records: list[Record]                  # cells/: the run's valid records
    digests: dict[str, str]                # "<cell>-r<k>" → sha256 of the bytes read
    unreadable: list[tuple[Path, str]]     # cells/ files that are not the run's records, why
    calibration_unreadable: list[tuple[Path, str]]     # idem, calibration/
    summaries: list[CellSummary]           # cell_summaries: as the history keeps them
    answers: dict[str, AnswerCheck]        # answers.check: each cell's verdicts, by cell id
    report: ReportModel                    # over the summaries with their verdicts
    ledger_restored: bool = False          # the held ledger was changed meanwhile: rewritten
    ledger_warning: str | None = None      # the ledger vouches for nothing, and why
    profile_problems: list[str] = field(default_factory=list)   # profiles left out, why


def analyse_run(store: Store, manifest: Manifest | None = None) -> RunAnalysis:
    """The run in `store` (its `manifest`, read from the folder where not given): its records
    read and checked once, summarised, their answers checked (a mapping of their own: the
    summaries are not changed), the effects, the profiles, and the report model over them."""
    restored = store.ledger.restore()        # the runner's own copy, before anything is read
    manifest = store.read_manifest() if manifest is None else manifest
    records, unreadable = store.read_records(manifest)
    calibration = store.calibration(create=False)
    # Calibration records are verified like the cells, and never in the tables.
    calibration_unreadable = calibration.read_records()[1] if calibration.cells.is_dir() else []
    ledger_warning = store.ledger.warning()
    summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])],
                               (manifest.get("calibration") or {}).get("peaks"),
                               manifest.get("machine_profile"), cost.price_of(manifest))
    checks = answers.check(summaries, answers.unchecked_cells(manifest))
    shown = answers.with_checks(summaries, checks)
    analysis = effects.analyse(shown, effects.Settings.from_manifest(
        manifest, stack_diff.installed(records)))
    found, profile_problems = read_profiles(store.root, store.ledger)
    profiled = Profiled(rows_of(found), failed=[p for p in found if p.get("status") != "ok"]) \
        if found else None
    left_out = [(str(path.relative_to(store.root)), why)
                for path, why in [*unreadable, *calibration_unreadable]]
    report = replace(build(manifest, shown, analysis, left_out, profiled),
                     ledger_fault=store.ledger.fault())
    keys = [f"{r['cell_id']}-r{r['repeat']}" for r in records]
    digests = {key: store.ledger.seen[store.ledger_name(store.record_path(key))] for key in keys}
    return RunAnalysis(manifest, records, digests, unreadable, calibration_unreadable, summaries,
                       checks, report, restored, ledger_warning, profile_problems)
