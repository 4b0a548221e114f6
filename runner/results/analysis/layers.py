"""The layer family's report (docs/layers.md): the Layers table — a row per layer × phase ×
shape set (and any other axis the run varied), a column per environment — and the Keras tax:
each Keras cell's time divided by the native cell of its engine in the same row (Keras 3 on
PyTorch over native torch, Keras 3 on JAX and TensorFlow over theirs, Keras 2 over native
TensorFlow), with the effects' interval (speedups.speedup: geometric means of the repeat
medians, a Welch t interval on their logarithms), sorted largest first. Above 1, the Keras layer
takes that many times the native twin's time on the same weights and inputs.

Which cell is whose native: an API's record (catalog/apis.py) says whether it is a Keras API
and which engine it computes with; a Keras cell pairs with each non-Keras cell of its engine.
A tax whose cells computed different answers (≠) or ran their float32 matmuls differently (†,
TF32 in one only) is shown but left out of the means and the findings, as every ratio is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...worker import catalog
from ...worker.catalog import AXIS_DEFAULTS
from ..data.types import CellSummary
from ..formatting import fmt, md_text
from .ratios import Ratio, geometric_mean_ratio
from .speedups import speedup
from .summaries import AXIS_KEYS, TIME_KEY, tf32_differ

WORKLOAD = "layer"
# A row's axes shown beside its layer (its shapes stand in its own column).
SHOWN_AXES = tuple(a for a in AXIS_KEYS if a != "size")


@dataclass(frozen=True)
class LayerRow:
    """One row of the Layers table: a layer, its phase, its shapes and the other axes."""

    layer: str
    phase: str
    shapes: str
    batch_size: int
    settings: str                          # the other non-default axes ("jit=true"), or ""
    cells: dict[str, CellSummary]          # environment → its cell

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        return (self.layer, self.phase, self.shapes, self.batch_size, self.settings)


@dataclass(frozen=True)
class KerasTax:
    """A Keras cell's time ÷ its engine's native cell on one row."""

    row: LayerRow
    keras: CellSummary
    native: CellSummary
    estimate: Ratio                        # keras ms ÷ native ms

    @property
    def differs(self) -> bool:
        return bool(self.keras.get("answer_differs") or self.native.get("answer_differs"))

    @property
    def tf32_mixed(self) -> bool:
        return tf32_differ(self.keras, self.native)

    @property
    def in_means(self) -> bool:
        return self.estimate.ratio is not None and not self.differs and not self.tf32_mixed


@dataclass(frozen=True)
class Layers:
    """The run's layer cells as the report shows them."""

    rows: list[LayerRow]
    environments: list[str]
    taxes: list[KerasTax]                  # sorted: the largest tax first, ratio-less last


def is_layer(summary: Mapping[str, Any]) -> bool:
    return summary.get("workload") == WORKLOAD


def settings_of(summary: Mapping[str, Any]) -> str:
    """The row's non-default axes besides its shapes (size) and phase."""
    return ", ".join(f"{axis}={summary.get(axis)}" for axis in SHOWN_AXES
                     if summary.get(axis, AXIS_DEFAULTS[axis]) != AXIS_DEFAULTS[axis])


def layer_rows(summaries: Sequence[CellSummary]) -> tuple[list[LayerRow], list[str]]:
    """The Layers table's rows (in the run's order) and its columns (environments)."""
    rows: dict[tuple[Any, ...], LayerRow] = {}
    environments: list[str] = []
    for s in summaries:
        if not is_layer(s):
            continue
        options = s.get("options") or {}
        row = LayerRow(str(options.get("layer")), s["task"], str(options.get("shapes")),
                       int(s["batch_size"]), settings_of(s), {})
        rows.setdefault(row.key, row).cells[s["environment"]] = s
        if s["environment"] not in environments:
            environments.append(s["environment"])
    return list(rows.values()), environments


def _keras_and_engine(summary: Mapping[str, Any]) -> tuple[bool, str | None] | None:
    record = catalog.API_RECORDS.get(str(summary.get("api")))
    if record is None:
        return None
    return bool(record.keras), record.on(summary.get("backend")).engine


def keras_taxes(rows: Sequence[LayerRow]) -> list[KerasTax]:
    """Every Keras cell of a row over each native cell of its engine, the largest first."""
    out = []
    for row in rows:
        cells = [c for c in row.cells.values() if c["status"] != "not_applicable"]
        kinds = {c["cell_id"]: _keras_and_engine(c) for c in cells}
        for keras in cells:
            kind = kinds[keras["cell_id"]]
            if kind is None or not kind[0]:
                continue
            for native in cells:
                other = kinds[native["cell_id"]]
                if other is not None and not other[0] and other[1] == kind[1]:
                    out.append(KerasTax(row, keras, native, speedup(keras, native)))
    return sorted(out, key=lambda t: (t.estimate.ratio is None, not t.in_means,
                                      -(t.estimate.ratio or 0.0)))


def layers_of(summaries: Sequence[CellSummary]) -> Layers | None:
    """The Layers section's data (None: the run has no layer cell)."""
    rows, environments = layer_rows(summaries)
    if not rows:
        return None
    return Layers(rows, environments, keras_taxes(rows))


def mean_taxes(taxes: Sequence[KerasTax]) -> list[tuple[str, str, Ratio, int]]:
    """Per (Keras environment, native environment): the geometric mean of its taxes over the
    rows whose answers agree with the same arithmetic, and how many rows that is."""
    pairs = list(dict.fromkeys((t.keras["environment"], t.native["environment"]) for t in taxes))
    out = []
    for keras, native in pairs:
        used = [t.estimate for t in taxes if (t.keras["environment"], t.native["environment"])
                == (keras, native) and t.in_means]
        if used:
            out.append((keras, native, geometric_mean_ratio(used), len(used)))
    return out


def where(tax: KerasTax) -> str:
    """'Dense forward, small shapes, batch 32 [jit=true]'."""
    row = tax.row
    settings = f" [{row.settings}]" if row.settings else ""
    return f"{row.layer} {row.phase}, {row.shapes} shapes, batch {row.batch_size}{settings}"


def sentences(layers: Layers | None) -> list[str]:
    """The findings: the largest Keras tax beyond noise, and each Keras environment's mean."""
    if layers is None:
        return []
    said = []
    judged = [t for t in layers.taxes if t.in_means]
    largest = next((t for t in judged if t.estimate.distinguishable and
                    (t.estimate.ratio or 0) > 1), None) or next(iter(judged), None)
    if largest is not None:
        said.append(f"Keras tax: the largest is {md_text(where(largest))}: "
                    f"{md_text(largest.keras['environment'])} "
                    f"{tax_words(largest.estimate, largest.native['environment'])}.")
    for keras, native, mean, count in mean_taxes(layers.taxes):
        if count > 1:
            said.append(f"Keras tax: {md_text(keras)} {tax_words(mean, native)}, geometric mean "
                        f"over {count} layer rows.")
    return said


def tax_words(estimate: Ratio, native: str) -> str:
    """'takes 3.2× the time of torch (95 % CI 2.9–3.5)', with '— not distinguishable from
    noise' where the interval covers 1."""
    text = f"takes {fmt(estimate.ratio)}× the time of {md_text(native)}"
    if not estimate.has_interval:
        return f"{text} (no interval: {estimate.why})"
    text += f" (95 % CI {fmt(estimate.low)}–{fmt(estimate.high)})"
    return text if estimate.distinguishable else text + " — not distinguishable from noise"


def memory_key(summaries: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The memory a layer's table shows: the device's peak where the cells ran on one, else the
    process's peak RSS (summary key, its words)."""
    if any(s.get("vram_peak_mb") is not None for s in summaries):
        return "vram_peak_mb", "framework-native device memory peak (MB)"
    return "rss_peak_mb", "process RSS peak (MB)"


def time_of(cell: Mapping[str, Any] | None) -> float | None:
    return cell.get(TIME_KEY) if cell is not None and cell["status"] == "ok" else None
