"""The report model: what a run's records say, computed once per report and handed to every
renderer (the terminal tables, report.md and its parts; report.html renders report.md), which
only format it. Each field says which analysis made it; a renderer reads fields and never calls
that analysis again (tests/results/analysis/test_report_model.py holds both: one call per report,
no such import under results/render/)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.types import CellSummary, Manifest
from ..formatting import md_text
from . import cost, findings, layers, native, reference
from .conditions import to_act_on
from .decoding import keras_titles
from .effects import Analysis
from .findings import Findings
from .keras_table import keras_view
from .layers import Layers
from .native import KerasView, NativeRatio
from .profiles import Profiled, biggest_gap, judge_rows
from .ratios import Ratio
from .scaling import ScalingRow, scaling_rows
from .speedups import keras_speedups, speedup
from .tiers import TierPair, ranking_changes, tier_pairs
from .summaries import fixed_costs, pivot, tf32_rows

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
    keras = keras_view(summaries)
    if profiled is not None:
        judge_rows(profiled, summaries)
    ratios = native.keras_over_native(keras)
    speedups = keras_speedups(summaries)
    # The time table's speedup columns: its own unless the Keras table has them.
    cells = table_view(summaries, speedups=speedups if keras is None else {})
    tiers = tier_pairs(summaries, manifest)
    layer_cells = layers.layers_of(summaries)
    return ReportModel(
        manifest, summaries, analysis, keras,
        table_view(keras[0], keras[1], keras[2], ratios) if keras else None, cells, speedups,
        ratios, keras_titles(keras),
        sentences(summaries, analysis, keras, ratios, profiled, tiers, layer_cells,
                  manifest.get("profile")),
        findings.method_sentence(summaries) if summaries else "", scaling_rows(summaries),
        fixed_costs(summaries), reference.beside(summaries), cost.price_of(manifest),
        quantized_cells(summaries), left_out or [], profiled, tiers, layers=layer_cells)
