"""Effects: what changing one thing did, as ratios between cells of one run with their intervals.

An effect is a **speedup**: the baseline cell's time ÷ the other cell's time, both the geometric
mean of their repeat medians (the repeat, a fresh process, is the unit), so above 1 the other
value is faster, below 1 slower; its 95 % interval is the Welch t interval on the logs of the
repeat medians (ratios.welch_ratio: the one `compare` uses), "–" with the reason where a side has
fewer than 3 repeats. An interval that covers 1 is not distinguishable from noise.

- **Axis effects**: for every axis that takes several values in the run (precision, jit, tf32,
  steps_per_execution, data, device, size, batch size, and every option given as a list such as
  options.n), per workload, environment and setting of everything else, each value against the
  baseline value: the first in the matrix, or `[report] baselines = { jit = false, ... }`. The
  batch size changes a step's work: its effect is on the time per item (sample, token, image).
- **Environment effects**: per row (workload, task, batch size, axes), every environment
  against the baseline environment (`[report] baseline_environment`, default the first), each
  named with what its stack changes against the baseline's (the distributions the records name:
  a version change, e.g. numpy 2.4.6 → 1.26.4).
- The **geometric mean** of a column's ratios, over the rows that computed the same answer,
  with the interval of that mean (ratios.geometric_mean_ratio).
- **Stack effects**: every two environments that share an image folder, API, backend and
  variables and differ only in their pins and packages (one framework at two stacks), the
  second against the first, named by what moved (stack_tables).
- The Keras 3 benchmark table's "best Keras 3 over Keras 2" is one environment effect: the Keras 2
  cell against the row's fastest Keras 3 cell (keras_speedups).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...worker import catalog
from ..data.types import CellSummary, Manifest
from . import quantized, stack_diff
from .ratios import Ratio, geometric_mean_ratio
from .speedups import fastest, keras_speedups, speedup
from .summaries import AXIS_KEYS, option_preset, pivot, row_label, tf32_differ

__all__ = ["fastest", "keras_speedups", "speedup"]   # speedups.py's, read from here too

ENVIRONMENT = "environment"
# Two environments that differ only in their pins and packages (stack_diff.stack_pairs).
STACK = "stack"
BETWEEN_ENVIRONMENTS = (ENVIRONMENT, STACK)


@dataclass(frozen=True)
class Settings:
    """The matrix's [report] table, as the run's manifest recorded it."""

    baselines: dict[str, Any] = field(default_factory=dict)    # "jit" / "options.n" → value
    baseline_environment: str | None = None
    environments: tuple[str, ...] = ()                          # the matrix's order
    # environment → the distributions installed there (stack_diff.installed of the records)
    stacks: dict[str, dict[str, str]] = field(default_factory=dict)
    # environment → its declaration in the manifest (image, api, backend, env, pins, packages)
    declared: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_manifest(cls, manifest: Manifest,
                      stacks: dict[str, dict[str, str]] | None = None) -> Settings:
        report = manifest.get("report") or {}
        baselines = {k: v for k, v in (report.get("baselines") or {}).items() if k != "options"}
        baselines |= {f"options.{k}": v
                      for k, v in ((report.get("baselines") or {}).get("options") or {}).items()}
        declared = manifest.get("environments") or {}
        return cls(baselines, report.get("baseline_environment"), tuple(declared), stacks or {},
                   {k: v for k, v in declared.items() if isinstance(v, dict)})


@dataclass
class Effect:
    """One ratio: `cell` (at `value`) against `base` (at the baseline)."""

    value: Any
    label: str                      # the row: workload (task) and every other setting
    batch_size: int
    environment: str                # the environment of `cell`
    base: Mapping[str, Any]
    cell: Mapping[str, Any]
    estimate: Ratio
    # The two float32 cells ran their dense paths differently (TF32 in one, full float32 or not
    # recorded in the other) while the factor is not tf32 itself: other arithmetic (†).
    tf32_mixed: bool = False
    # A quantized value's answer error beside its speedup (quantized.error_text): its time is
    # of other work than the baseline's, with this much error.
    note: str = ""

    @property
    def differs(self) -> bool:
        """Either cell computed a different answer from its row: the ratio compares apples
        with pears."""
        return bool(self.base.get("answer_differs") or self.cell.get("answer_differs"))

    @property
    def in_means(self) -> bool:
        """Whether the ratio joins the geometric means and the findings' counts: it has a value,
        and both cells computed the same answer with the same arithmetic."""
        return self.estimate.ratio is not None and not self.differs and not self.tf32_mixed


@dataclass
class EffectTable:
    """The effects of one factor (an axis, an option, or the environment) against one baseline."""

    factor: str
    baseline: Any
    values: list[Any]
    effects: list[Effect]
    without_baseline: int = 0       # groups that had no cell at a configured baseline
    # The environment factor: environment → what its stack changes against the baseline's.
    changes: dict[str, str] = field(default_factory=dict)

    def of(self, value: Any) -> list[Effect]:
        return [e for e in self.effects if _same(e.value, value)]

    def overall(self, value: Any) -> tuple[Ratio, int]:
        """The geometric mean of `value`'s ratios over the rows whose answers and arithmetic
        agree (Effect.in_means), and how many rows it spans."""
        used = [e.estimate for e in self.of(value) if e.in_means]
        return geometric_mean_ratio(used), len(used)

    @property
    def title(self) -> str:
        if self.factor == ENVIRONMENT:
            return f"Environments against {self.baseline}"
        if self.factor == STACK:
            return f"Stack: {', '.join(self.values)} against {self.baseline}"
        per = " (time per item)" if self.factor in PER_ITEM_FACTORS else ""
        return f"{self.factor}: against {self.factor} = {shown(self.baseline)}{per}"


def shown(value: Any) -> str:
    return {True: "true", False: "false", None: "unset"}.get(value, str(value)) \
        if isinstance(value, (bool, type(None))) else str(value)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def coordinates(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Everything that places a cell besides its workload, task and environment."""
    out = {"batch_size": summary.get("batch_size"), **{k: summary.get(k) for k in AXIS_KEYS}}
    out |= {f"options.{k}": v for k, v in (summary.get("options") or {}).items()}
    return out


def _context(summary: CellSummary, factor: str) -> tuple[Any, ...]:
    """Where a cell sits apart from `factor`: the cells of one context differ only in it. For
    the size axis the options its preset sets go with it."""
    coords = coordinates(summary)
    coords.pop(factor, None)
    if factor == "size":
        preset = option_preset(summary)
        coords = {k: v for k, v in coords.items()
                  if not (k.startswith("options.") and preset.get(k[8:]) == v)}
    return (summary["workload"], summary["task"], summary["environment"],
            tuple(sorted((k, repr(v)) for k, v in coords.items())))


def _factors(summaries: list[CellSummary]) -> list[str]:
    keys: dict[str, None] = {}
    for s in summaries:
        keys |= dict.fromkeys(k for k in coordinates(s) if not _names_the_work(s, k))
    return list(keys)


def _names_the_work(summary: CellSummary, key: str) -> bool:
    """An option its workload declares as picking what a cell computes (the layer family's
    options.layer): Embedding "48.6× faster" than Dense is another layer, not an effect."""
    declared = catalog.WORKLOADS.get(str(summary.get("workload")))
    option = declared.options.get(key[len("options."):]) \
        if declared is not None and key.startswith("options.") else None
    return option is not None and option.names_the_work


def axis_tables(summaries: list[CellSummary], settings: Settings) -> list[EffectTable]:
    """One table per varying factor and baseline value, rows in the run's order."""
    measured = [s for s in summaries if s["status"] != "not_applicable"]
    tables: dict[tuple[str, str], EffectTable] = {}
    for factor in _factors(measured):
        groups: dict[tuple[Any, ...], list[CellSummary]] = defaultdict(list)
        for s in measured:
            groups[_context(s, factor)].append(s)
        for cells in groups.values():
            values = list({repr(coordinates(c).get(factor)): coordinates(c).get(factor)
                           for c in cells}.values())
            if len(values) < 2:
                continue
            baseline = values[0]
            if factor in settings.baselines:
                if not any(_same(v, settings.baselines[factor]) for v in values):
                    key = (factor, repr(settings.baselines[factor]))
                    tables.setdefault(key, EffectTable(factor, settings.baselines[factor], [], []))
                    tables[key].without_baseline += 1
                    continue
                baseline = settings.baselines[factor]
            base = next(c for c in cells if _same(coordinates(c).get(factor), baseline))
            table = tables.setdefault((factor, repr(baseline)),
                                      EffectTable(factor, baseline, [], []))
            for cell in cells:
                value = coordinates(cell).get(factor)
                if _same(value, baseline):
                    continue
                if not any(_same(value, v) for v in table.values):
                    table.values.append(value)
                estimate = speedup(base, cell)
                if factor in PER_ITEM_FACTORS:
                    estimate = per_item(estimate, base, cell)
                table.effects.append(Effect(value, row_label(base, without=factor),
                                            base["batch_size"], cell["environment"], base, cell,
                                            estimate, factor != "tf32" and tf32_differ(base, cell),
                                            quantized.error_text(cell.get("quantization"), True)))
    return [t for t in tables.values() if t.effects or t.without_baseline]


# The batch size changes the work of a step, and so do the devices of a data-parallel cell
# (weak scaling: a global batch of batch_size × devices): their effect is on the time per item
# (sample, token, image), not per step — a throughput speedup (docs/scaling.md).
PER_ITEM_FACTORS = ("batch_size", "devices")


def per_item(estimate: Ratio, base: Mapping[str, Any], cell: Mapping[str, Any]) -> Ratio:
    """A speedup of time per step turned into one of time per item (× cell items ÷ base items)."""
    base_items, cell_items = base.get("items_per_step"), cell.get("items_per_step")
    if not base_items or not cell_items:
        return Ratio(None, why="items per step not recorded")
    return estimate.scaled(cell_items / base_items)


def baseline_environment(summaries: list[CellSummary], settings: Settings) -> str | None:
    """The configured baseline environment, else the matrix's first one that has cells."""
    present = [e for e in pivot(summaries)[0]]
    if settings.baseline_environment in present:
        return settings.baseline_environment
    ordered = [e for e in settings.environments if e in present] + present
    return ordered[0] if ordered else None


def environment_table(summaries: list[CellSummary], settings: Settings) -> EffectTable | None:
    """Every environment against the baseline environment, row by row; None with one
    environment."""
    environments = pivot(summaries)[0]
    baseline = baseline_environment(summaries, settings) if len(environments) > 1 else None
    if baseline is None:
        return None
    table = against(summaries, ENVIRONMENT, baseline, [e for e in environments if e != baseline])
    table.changes = version_changes(table, settings.stacks)
    return table if table.effects else None


def against(summaries: list[CellSummary], factor: str, baseline: str,
            others: list[str]) -> EffectTable:
    """`others` against the `baseline` environment, row by row (the rows both measured)."""
    _, rows, grid = pivot(summaries)
    table = EffectTable(factor, baseline, others, [])
    for label, batch in rows:
        base = grid.get((label, batch, baseline))
        if base is None or base["status"] == "not_applicable":
            continue
        for env in table.values:
            cell = grid.get((label, batch, env))
            if cell is None or cell["status"] == "not_applicable":
                continue
            table.effects.append(Effect(env, label, batch, env, base, cell, speedup(base, cell),
                                        tf32_differ(base, cell)))
    table.values = [env for env in table.values if table.of(env)]   # shares no row: no column
    return table


def stack_tables(summaries: list[CellSummary], settings: Settings) -> list[EffectTable]:
    """A stack effect for every two environments that differ only in their pins and packages
    (stack_diff.stack_pairs: `torch` against `torch-2-15`), named by what moved; a pair with the
    baseline environment is already in the environment table."""
    present = pivot(summaries)[0]
    baseline = baseline_environment(summaries, settings)
    out = []
    for first, second in stack_diff.stack_pairs(settings.declared, present):
        if baseline in (first, second):
            continue
        table = against(summaries, STACK, first, [second])
        table.changes = {second: stack_diff.moved(settings.declared, settings.stacks, first,
                                                  second)}
        out += [table] if table.effects else []
    return out


def version_changes(table: EffectTable, stacks: dict[str, dict[str, str]]) -> dict[str, str]:
    """environment → what its stack changes against the baseline's, for the environments that
    run the baseline's API and backend (then the effect is one of versions; between two
    frameworks it is the framework's, and a list of their different packages says nothing)."""
    out = {}
    for env in table.values:
        effect = table.of(env)[0]
        same_api = all(effect.base.get(k) == effect.cell.get(k) for k in ("api", "backend"))
        if same_api and env in stacks and table.baseline in stacks:
            out[env] = stack_diff.text(stack_diff.changes(stacks[table.baseline], stacks[env]))
    return out


@dataclass
class Analysis:
    """Everything the report says about effects."""

    settings: Settings
    axes: list[EffectTable]
    environments: EffectTable | None
    stacks: list[EffectTable] = field(default_factory=list)     # stack_tables

    @property
    def tables(self) -> list[EffectTable]:
        return self.axes + ([self.environments] if self.environments else []) + self.stacks


def analyse(summaries: list[CellSummary], settings: Settings | None = None) -> Analysis:
    settings = settings or Settings()
    return Analysis(settings, axis_tables(summaries, settings),
                    environment_table(summaries, settings), stack_tables(summaries, settings))
