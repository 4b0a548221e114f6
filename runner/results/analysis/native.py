"""What Keras costs over native: per row of the Keras table, each Keras 3 backend's time and the
best Keras 3's divided by the time of Hugging Face's model code on native PyTorch (the hf api),
eager and compiled, with the effects' interval (effects.speedup: geometric means of repeat
medians, Welch t interval on their logarithms). Above 1, Keras takes that many times longer;
below 1, it is faster. The rows' geometric mean per column spans the rows whose cells computed the
same answer with the same arithmetic (as every effect's mean).

TF32: in a float32 row on an A100 the JAX and TensorFlow cells run their matmuls on TF32 while
HF's PyTorch runs them in full float32 (torch's default). A Keras column's ratio against a native
cell of other arithmetic is marked † and left out of the means and sentences, as the effects do;
"best Keras 3" compares like with like: the fastest Keras 3 cell among those that ran their dense
paths as the native cell did, and only where none did, the fastest, marked †. The Keras table is keras_table.keras_view: the hf cells are
its native columns (keras_table.native_cells), compiled ones moved into their Keras rows.

Its parts of report.md (the effects section's table, the findings' sentences, the Keras table's
two ratio columns) and of the terminal's Keras table are written from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..data.types import CellSummary
from ..formatting import fmt, md_text
from .effects import fastest, speedup
from .ratios import Ratio, geometric_mean_ratio
from .summaries import KERAS3, NATIVE, TF32_MARK, pivot, table_group, tf32_differ

BEST = "best Keras 3"
KerasView = tuple[list[CellSummary], list[str], dict[str, str]]


@dataclass(frozen=True)
class NativeRatio:
    """Keras time ÷ native time on one row: `keras` a Keras 3 column (its title) or BEST."""

    label: str
    batch_size: int
    keras: str
    native: str                     # the native column's title, "HF PyTorch (eager)"
    keras_cell: Mapping[str, Any]
    native_cell: Mapping[str, Any]
    estimate: Ratio
    # BEST only: a faster Keras 3 cell of other arithmetic (TF32 against full float32) was
    # passed over for the fastest of the native cell's own.
    narrowed: bool = False

    @property
    def differs(self) -> bool:
        return bool(self.keras_cell.get("answer_differs") or self.native_cell.get("answer_differs"))

    @property
    def tf32_mixed(self) -> bool:
        """The two float32 cells ran their dense paths differently (TF32 in one, full float32 or
        not recorded in the other): the ratio compares other arithmetic (†)."""
        return tf32_differ(self.keras_cell, self.native_cell)

    @property
    def in_means(self) -> bool:
        """Whether the ratio joins the means and the sentences: it has a value, and both cells
        computed the same answer with the same arithmetic."""
        return self.estimate.ratio is not None and not self.differs and not self.tf32_mixed


def keras_over_native(view: KerasView | None) -> list[NativeRatio]:
    """Every row's Keras 3 columns and its best Keras 3 against each native column of the row."""
    if view is None:
        return []
    rows, columns, titles = view
    _, keys, grid = pivot(rows)
    # A quantized column group (keras_table.quantized_columns) is other work: not compared here.
    group = {s["environment"]: table_group(s) for s in rows if not s.get("column_group")}
    natives = [c for c in columns if group.get(c) == NATIVE]
    keras3 = [c for c in columns if group.get(c) == KERAS3]
    out = []
    for label, batch in keys:
        present = {c: grid[(label, batch, c)] for c in natives + keras3
                   if (label, batch, c) in grid and grid[(label, batch, c)]["status"] != "not_applicable"}
        for native in (c for c in natives if c in present):
            base = present[native]
            pairs: list[tuple[str, Mapping[str, Any]]] = [(titles[c], present[c])
                                                          for c in keras3 if c in present]
            out += [NativeRatio(label, batch, title, titles[native], cell, base,
                                speedup(cell, base)) for title, cell in pairs]
            cells = [cell for _, cell in pairs]
            found, anyhow = best_keras(base, cells), fastest(cells)
            if found is not None:
                out.append(NativeRatio(label, batch, BEST, titles[native], found[0], base,
                                       speedup(found[0], base),
                                       anyhow is not None and anyhow[0] is not found[0]))
    return out


def best_keras(native: Mapping[str, Any],
               cells: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], bool | None] | None:
    """The row's best Keras 3 against `native`: the fastest cell among those that ran their dense
    paths as the native cell did (like with like); where none did, the fastest of all (its
    ratio then carries †)."""
    return fastest([c for c in cells if not tf32_differ(c, native)]) or fastest(cells)


def columns_of(ratios: Sequence[NativeRatio]) -> tuple[list[str], list[str]]:
    """(Keras columns, native columns) in the order met."""
    return (list(dict.fromkeys(r.keras for r in ratios)),
            list(dict.fromkeys(r.native for r in ratios)))


def overall(ratios: Sequence[NativeRatio], keras: str, native: str) -> tuple[Ratio, int]:
    """The geometric mean of a column's ratios over the rows whose answers agree, and how many
    rows it spans."""
    used = [r.estimate for r in ratios if r.keras == keras and r.native == native and r.in_means]
    return geometric_mean_ratio(used), len(used)


def cost_text(estimate: Ratio) -> str:
    """'2.10× (1.90–2.32)', '1.30× (no interval)' or '– (why)'."""
    if estimate.ratio is None:
        return f"– ({estimate.why})"
    if not estimate.has_interval:
        return f"{fmt(estimate.ratio)}× (no interval)"
    return f"{fmt(estimate.ratio)}× ({fmt(estimate.low)}–{fmt(estimate.high)})"


def ratio_cell(ratio: NativeRatio) -> str:
    """A table's cell: cost_text with † where the two cells ran other arithmetic and ≠ where one
    computed a different answer; a best Keras 3 cell names its backend (the fastest Keras 3
    cell of the native cell's arithmetic: not always the row's fastest Keras 3 cell, which the
    Keras table's "Best Keras 3" column names)."""
    backend = ratio.keras_cell.get("backend")      # as the "Best Keras 3" column names it
    named = f" ({backend})" if ratio.keras == BEST and backend and ratio.estimate.ratio \
        is not None else ""
    return cost_text(ratio.estimate) + named + (f" {TF32_MARK}" if ratio.tf32_mixed else "") \
        + (" ≠" if ratio.differs else "")


def cost_words(estimate: Ratio, native: str) -> str:
    """'takes 2.10× the time of HF PyTorch (eager) (95 % CI 1.90–2.32)', with "— not
    distinguishable from noise" when the interval covers 1."""
    text = f"takes {fmt(estimate.ratio)}× the time of {md_text(native)}"
    if not estimate.has_interval:
        return f"{text} (no interval: {estimate.why})"
    text += f" (95 % CI {fmt(estimate.low)}–{fmt(estimate.high)})"
    return text if estimate.distinguishable else text + " — not distinguishable from noise"


def best_of(ratios: Sequence[NativeRatio]) -> dict[tuple[str, int], dict[str, NativeRatio]]:
    """Per Keras table row: best Keras 3 ÷ each native column (the Keras table's ratio columns),
    of keras_over_native's ratios."""
    out: dict[tuple[str, int], dict[str, NativeRatio]] = {}
    for r in ratios:
        if r.keras == BEST:
            out.setdefault((r.label, r.batch_size), {})[r.native] = r
    return out


def native_titles(view: KerasView | None) -> list[str]:
    if view is None:
        return []
    rows, columns, titles = view
    # A quantized column group (keras_table.quantized_columns) is other work: not compared here.
    group = {s["environment"]: table_group(s) for s in rows if not s.get("column_group")}
    return [titles.get(c, c) for c in columns if group.get(c) == NATIVE]


def markdown_lines(ratios: Sequence[NativeRatio]) -> list[str]:
    """The effects section's "Keras over native" part (keras_over_native's ratios): per native
    column a table of rows × Keras columns, then the geometric mean of each column."""
    if not ratios:
        return []
    keras_columns, natives = columns_of(ratios)
    out = ["### Keras over native (Hugging Face PyTorch)", "",
           "Each Keras 3 column's time ÷ the native column's time on the same row (geometric "
           "means of repeat medians; above 1 Keras takes longer, below 1 it is faster), with its "
           "95 % interval as every effect's; best Keras 3: the row's fastest Keras 3 cell among "
           "those that ran their float32 matmuls and convolutions as the native cell did (TF32 "
           "or full float32), the fastest of all only where none did. The native cells run "
           "Hugging Face's model code (transformers, diffusers, peft) on PyTorch, built from the "
           "same configurations with the same inputs.", ""]
    for native in natives:
        mine = [r for r in ratios if r.native == native]
        out += [f"#### Against {md_text(native)}", "",
                "| Workload (task) | Batch size | " + " | ".join(map(md_text, keras_columns))
                + " |",
                "|---|---:|" + "---:|" * len(keras_columns)]
        keyed: dict[tuple[str, int], dict[str, str]] = {}
        for r in mine:
            keyed.setdefault((r.label, r.batch_size), {})[r.keras] = ratio_cell(r)
        out += [f"| {md_text(label)} | {batch} | " + " | ".join(cells.get(k, "") for k in keras_columns)
                + " |" for (label, batch), cells in keyed.items()]
        means = []
        for keras in keras_columns:
            mean, rows = overall(mine, keras, native)
            means.append(f"{cost_text(mean)} over {rows} row{'s' if rows != 1 else ''}"
                         if mean.ratio is not None else "–")
        out += ["| **Geometric mean** | | " + " | ".join(means) + " |", ""]
        if any(r.tf32_mixed for r in mine):
            out += [TF32_RATIO_NOTE, ""]
    return out


TF32_RATIO_NOTE = (f"{TF32_MARK} The Keras cell ran its float32 matmuls and convolutions "
                   "differently from the native one (TF32 tensor cores in one, full float32 or "
                   "not recorded in the other): the ratio compares other arithmetic and is left "
                   "out of the geometric mean and the findings.")


def sentences(ratios: Sequence[NativeRatio]) -> list[str]:
    """The findings (of keras_over_native's ratios): per native column, the best Keras 3's cost
    over it (its geometric mean, or the row itself when there is one), then each Keras 3
    backend's."""
    keras_columns, natives = columns_of(ratios)
    out = []
    for native in natives:
        for keras in [BEST] + [k for k in keras_columns if k != BEST]:
            mean, rows = overall(ratios, keras, native)
            if mean.ratio is None:
                continue
            where = f"geometric mean over {rows} rows" if rows > 1 else next(
                f"{md_text(r.label)}, batch {r.batch_size}" for r in ratios if r.keras == keras
                and r.native == native and r.in_means)
            who = "The best Keras 3 backend" if keras == BEST else md_text(keras)
            if keras == BEST and any(r.narrowed for r in ratios if r.native == native):
                who += " of the native cell's arithmetic (TF32 or full float32)"
            out.append(f"Keras over native: {who} {cost_words(mean, native)}, {where}.")
    mixed = sum(r.tf32_mixed for r in ratios)
    if mixed:
        out.append(f"Keras over native: {mixed} ratio(s) compare a Keras cell that ran its "
                   "float32 matmuls or convolutions differently from the native one (TF32 in "
                   f"one, full float32 in the other): marked {TF32_MARK}, left out of the means "
                   "and the sentences above.")
    return out
