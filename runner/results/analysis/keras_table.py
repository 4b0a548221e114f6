"""The Keras 3 benchmark study's table as a view of the cell summaries: its rows (the keras-hub
models), its columns in the study's order (Keras 2 | Keras 3 TensorFlow | JAX | PyTorch) named as
the study names them, then the native columns (Hugging Face's code on PyTorch, eager and
compiled). Plain data: the renderers lay it out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ...worker import catalog
from ..data.types import CellSummary
from .summaries import KERAS2, KERAS3, NATIVE, row_label, table_group



def native_kind(summary: Mapping[str, Any]) -> str:
    """An hf cell's column: "eager", "compiled", or "compiled, MODE" (a torch.compile mode)."""
    jit = summary.get("jit")
    if jit in (False, "auto", None):
        return "eager"
    return "compiled" if jit is True else f"compiled, {jit}"


def native_cells(summaries: list[CellSummary]) -> list[CellSummary]:
    """The hf api's keras-hub cells as columns of the Keras table, one per environment and jit
    value ("HF PyTorch (eager)", "(compiled)"): copies whose row label leaves the jit value out,
    so that a compiled cell sits in the row of the Keras cells it is compared with."""
    return [cast(CellSummary, {**s, "label": row_label(s, without="jit"),
                               "environment": f"{s['environment']} (jit={s.get('jit')})"})
            for s in summaries if table_group(s) == NATIVE and catalog.is_hub(s["workload"])
            and (s.get("devices") or 1) == 1]


def keras_view(summaries: list[CellSummary]) -> tuple[list[CellSummary], list[str],
                                                         dict[str, str]] | None:
    """The Keras 3 benchmark study's layout: its rows (the keras-hub models) with columns
    Keras 2 | Keras 3 TensorFlow | JAX | PyTorch, each named as the study names it (PyTorch
    "eager" unless its cells compiled), then the native columns, HF PyTorch eager and compiled
    (native_cells). (summaries, column order, titles), or None when the run has no such rows."""
    rows = [s for s in summaries if catalog.is_hub(s["workload"])
            and table_group(s) in (KERAS3, KERAS2)
            and (s.get("devices") or 1) == 1]      # data-parallel rows: the Scaling section
    if not rows:
        return None
    rows = quantized_columns(rows + native_cells(summaries))

    def rank(env: str) -> tuple[int, int]:
        first = next(s for s in rows if s["environment"] == env)
        if group_of(first):                 # after every float column, mode by mode
            return (3 + catalog.PRECISIONS.index(str(group_of(first))), 0)
        if table_group(first) == KERAS2:
            return (0, 0)
        if table_group(first) == NATIVE:
            return (2, native_kind(first) != "eager")
        backend = first.get("backend")
        return (1, catalog.KERAS_BACKENDS.index(backend) if backend in catalog.KERAS_BACKENDS
                else 9)

    columns = sorted(dict.fromkeys(s["environment"] for s in rows), key=rank)
    titles: dict[str, str] = {}
    for env in columns:
        titles[env] = column_title([s for s in rows if s["environment"] == env], titles)
    return rows, columns, titles


def group_of(summary: Mapping[str, Any]) -> str | None:
    """The quantized column group a Keras table cell sits in (None: a float column)."""
    return summary.get("column_group")


def quantized_columns(rows: list[CellSummary]) -> list[CellSummary]:
    """The quantized cells as a column group of their precision (docs/quantized.md): copies in
    the row of the float precision they were built in, in a column "<environment> · int8",
    marked `column_group` (never bold, never "best Keras 3" or "fastest" against the float
    columns: other work)."""
    out = []
    for s in rows:
        precision = str(s.get("precision"))
        if not catalog.is_quantized(precision):
            out.append(s)
            continue
        base = cast(CellSummary, {**s, "precision": catalog.float_base(precision)})
        native = table_group(s) == NATIVE
        out.append(cast(CellSummary, {
            **s, "label": row_label(base, without="jit" if native else None),
            "environment": f"{s['environment']} · {precision}", "column_group": precision}))
    return out


def column_title(cells: list[CellSummary], taken: dict[str, str]) -> str:
    """A Keras table column's title, with its environment where two would read the same."""
    first = cells[0]
    group = group_of(first)
    if group:
        bare = cast(CellSummary, {**first, "column_group": None})
        return f"{column_title([bare, *cells[1:]], {})} · {group}"
    if table_group(first) == KERAS2:
        title = "Keras 2 (TensorFlow)"
    elif table_group(first) == NATIVE:
        title = f"HF PyTorch ({native_kind(first)})"
    else:
        backend = str(first.get("backend"))
        engine = catalog.ENGINES.get(backend)
        title = f"Keras 3 ({engine.title if engine else backend})"
        # Where Keras's jit_compile="auto" runs eagerly (the study's PyTorch column): say which.
        if engine is not None and engine.keras_auto == "eager":
            compiled = [s.get("jit_compile") for s in cells if s["status"] == "ok"]
            title += " (compiled)" if compiled and all(compiled) else " (eager)"
    if title in taken.values():
        title += f" [{first['environment']}]"
    return title
