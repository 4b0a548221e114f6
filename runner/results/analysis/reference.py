"""The Keras 3 benchmark study's published Table 2 (reference/keras3_benchmarks_table2.toml) and
this run's cells beside it: plain data for the renderers."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any
from ..data.types import CellSummary
from .summaries import KERAS2, KERAS3, TIME_KEY, table_group

TABLE2 = Path(__file__).with_name("reference") / "keras3_benchmarks_table2.toml"
# The study's columns, and how an environment of a run maps onto them.
COLUMNS = ("keras2", "keras3_tensorflow", "keras3_jax", "keras3_torch")
TITLES = {"keras2": "Keras 2 (TensorFlow)", "keras3_tensorflow": "Keras 3 TensorFlow",
          "keras3_jax": "Keras 3 JAX", "keras3_torch": "Keras 3 PyTorch"}


@functools.lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    with TABLE2.open("rb") as handle:
        return tomllib.load(handle)


def column_of(summary: CellSummary) -> str | None:
    group = table_group(summary)
    if group == KERAS2:
        return "keras2"
    if group == KERAS3:
        return f"keras3_{summary.get('backend')}"
    return None


# Rows the study timed its own way: Stable Diffusion predict as (T(N+2 steps) − T(2 steps)) / N
# (derived.study_step_ms), compared with that figure of the run, never with call time / N.
STUDY_TIMED = {("stable_diffusion", "predict")}


def measured(summary: CellSummary, study_timed: bool) -> float | None:
    """The run's figure for a published one: timed by the study's own method where it had one."""
    return summary.get("study_step_ms") if study_timed else summary.get(TIME_KEY)


def beside(summaries: list[CellSummary]) -> list[dict[str, Any]]:
    """One entry per study row the run has cells for: per column the published ms/step, the
    measured figure (the study's method where it timed a row its own way: STUDY_TIMED), and
    their ratio where the cell is comparable in kind (ran ok on a GPU at the full size, and the
    figure exists; a tiny smoke cell or a CPU run gets no ratio)."""
    out = []
    for row in published()["rows"]:
        cells = [s for s in summaries if (s["workload"], s["task"], s["batch_size"]) ==
                 (row["workload"], row["task"], row["batch_size"]) and column_of(s)]
        if not cells:
            continue
        study = (row["workload"], row["task"]) in STUDY_TIMED
        columns: dict[str, dict[str, Any]] = {}
        for column in COLUMNS:
            mine = [s for s in cells if column_of(s) == column]
            ok = [s for s in mine if s["status"] == "ok" and measured(s, study)]
            best = min(ok, key=lambda s: measured(s, study) or 0.0) if ok else None
            figure = measured(best, study) if best is not None else None
            full_gpu = best is not None and best.get("size") == "full" and best.get("on_gpu")
            columns[column] = {
                "published_ms": row.get(column), "measured_ms": figure,
                "status": best["status"] if best else (mine[0]["status"] if mine else None),
                "size": best.get("size") if best else None,
                "ratio": figure / row[column] if figure and full_gpu and row.get(column) else None,
            }
        out.append({"workload": row["workload"], "task": row["task"],
                    "batch_size": row["batch_size"], "columns": columns})
    return out
