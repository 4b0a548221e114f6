"""report.md's "Layers" (docs/layers.md): the layer family's table (a row per layer × phase ×
shapes, a column per environment, ms per step), the Keras tax sorted largest first with its
interval and its means, and each layer's memory."""

from __future__ import annotations

from ..analysis.report_model import (ANSWER_MARK, TF32_MARK, TIME_KEY, KerasTax, LayerRow,
                                     Layers, mean_taxes, memory_key)
from ..formatting import best_text, cell_text, comparable_values, fmt, md_text
from .markdown_parts import no_interval_note, ratio_text

INTRO = ("Each layer of the table (`options.layer`, its Keras class name) on its seeded weights "
         "and inputs: the Keras layer on the Keras environments, its native twin with the same "
         "weights on the native ones (docs/layers.md). Phases: forward (inference), train "
         "(forward, loss, gradients, SGD step; the loss read back each call) and backward "
         "(gradients only); shapes: small (keras's own benchmark shapes: the framework's "
         "overhead), model (the catalog's models' sizes: the kernels), tiny (tests). ms per "
         "step: the geometric mean of the repeat medians, best in bold; NA: the layer or phase "
         "does not exist there (the plan says why).")
TAX_INTRO = ("Keras tax: each Keras environment's time ÷ the native environment of its engine "
             "on the same row (Keras 3 on PyTorch ÷ torch, on JAX ÷ jax, on TensorFlow and "
             "Keras 2 ÷ tensorflow), with its 95 % interval (a Welch t interval on the "
             "logarithms of the repeat medians: 3 repeats per cell are needed). Above 1 the "
             "Keras layer takes that many times the native twin's time; an interval covering 1 "
             "is noise. Largest first.")


def _head(environments: list[str]) -> list[str]:
    return ["| Layer | Phase | Shapes | Batch size | " + " | ".join(map(md_text, environments))
            + " |", "|---|---|---|---:|" + "---:|" * len(environments)]


def _row_start(row: LayerRow) -> str:
    settings = f" [{md_text(row.settings)}]" if row.settings else ""
    return f"| {md_text(row.layer)}{settings} | {md_text(row.phase)} | {md_text(row.shapes)} | " \
           f"{row.batch_size} | "


def layer_table(layers: Layers, key: str, bold_best: bool = True) -> list[str]:
    lines = _head(layers.environments)
    for row in layers.rows:
        cells = [row.cells.get(e) for e in layers.environments]
        best = best_text(comparable_values(cells, key)) if bold_best else None
        lines.append(_row_start(row) + " | ".join(cell_text(c, key, best) for c in cells) + " |")
    return lines


def _tax_cell(tax: KerasTax) -> str:
    return ratio_text(tax.estimate) + (f" {TF32_MARK}" if tax.tf32_mixed else "") \
        + (f" {ANSWER_MARK}" if tax.differs else "")


def tax_table(taxes: list[KerasTax]) -> list[str]:
    lines = ["| Layer | Phase | Shapes | Batch size | Keras | Native | Keras ms | Native ms | "
             "Keras tax (95 % CI) |", "|---|---|---|---:|---|---|---:|---:|---:|"]
    for tax in taxes:
        lines.append(_row_start(tax.row) + f"{md_text(tax.keras['environment'])} | "
                     f"{md_text(tax.native['environment'])} | {fmt(tax.keras.get(TIME_KEY))} | "
                     f"{fmt(tax.native.get(TIME_KEY))} | {_tax_cell(tax)} |")
    return lines


def layers_section(layers: Layers | None) -> list[str]:
    """The report model's layers (analysis/layers.py), or nothing without a layer cell."""
    if layers is None:
        return []
    out = ["## Layers", "", INTRO, "", *layer_table(layers, TIME_KEY), ""]
    if layers.taxes:
        out += ["### Keras tax", "", TAX_INTRO, "", *tax_table(layers.taxes)]
        out += no_interval_note([t.estimate for t in layers.taxes]) + [""]
        means = mean_taxes(layers.taxes)
        if means:
            out += ["Geometric mean of each pair's taxes over the rows whose answers agree: "
                    + "; ".join(f"{md_text(k)} ÷ {md_text(n)} {ratio_text(m)} over {c} "
                                f"row{'s' if c != 1 else ''}" for k, n, m, c in means) + ".", ""]
        if any(t.differs or t.tf32_mixed for t in layers.taxes):
            out += [f"{ANSWER_MARK}: a cell computed a different answer; {TF32_MARK}: the two "
                    "cells ran their float32 matmuls differently (TF32 in one only). Either is "
                    "left out of the means and the findings.", ""]
    key, words = memory_key([c for row in layers.rows for c in row.cells.values()])
    out += ["### Memory per layer", "", f"{words[0].upper()}{words[1:]}, per cell (the largest "
            "repeat; a process's whole footprint, framework included):", "",
            *layer_table(layers, key, bold_best=False), ""]
    return out
