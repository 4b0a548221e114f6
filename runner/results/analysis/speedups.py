"""Speedups between two cells and the winners of a row: one cell's time over another's with its
interval (the effects', `compare`'s and the Keras table's ratio), the fastest cell of a row
beyond noise, and the Keras table's best Keras 3 against Keras 2. What effects.py builds its
tables from; it re-exports them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..data.types import CellSummary
from . import quantized, stats
from .ratios import Ratio, welch_ratio
from .summaries import (KERAS2, KERAS3, TIME_KEY, model_family, pivot, table_group,
                        tf32_differ)


def speedup(base: Mapping[str, Any], cell: Mapping[str, Any],
            confidence: float = stats.CONFIDENCE) -> Ratio:
    """base ms ÷ cell ms (geometric means of repeat medians) with its interval; above 1: `cell`
    is faster. No ratio where either is not ok or the two run different models."""
    for side in (base, cell):
        if side["status"] != "ok":
            return Ratio(None, why=f"{side['environment']}: {side['status']}")
    if base.get("emulated") or cell.get("emulated"):        # never timed as if native
        return Ratio(None, why=quantized.EMULATED_WHY)
    if model_family(base) != model_family(cell):
        return Ratio(None, why="different models (Keras 2's Stable Diffusion is v1.4, "
                                     "Keras 3's is SD3)")
    return welch_ratio(base.get("repeat_medians_ms") or [],
                             cell.get("repeat_medians_ms") or [], confidence)


def fastest(cells: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], bool | None] | None:
    """The fastest of a row's ok cells that computed the same answer (by TIME_KEY, the ratios'
    own estimator), and whether it is fastest beyond noise (None with one cell): ahead of every
    other such cell, each lead's interval at confidence 1 − 0.05 / (k − 1) above 1. Testing the
    winner against the runner-up alone ignores that the winner was picked by the same noisy
    numbers, and that a noisier cell further down may still be faster; against all of them,
    Bonferroni-corrected, a cell is called fastest beyond noise when it is not at most 5 % of
    the time (simulated in tests/results/analysis/test_effects.py)."""
    eligible = ranked(cells)
    if not eligible:
        return None
    best, others = eligible[0], eligible[1:]
    if not others:
        return best, None
    level = 1 - (1 - stats.CONFIDENCE) / len(others)
    leads = [speedup(other, best, level) for other in others]
    return best, all(lead.low is not None and lead.low > 1 for lead in leads)


def ranked(cells: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A row's cells that may be its fastest, fastest first (by TIME_KEY): ok, timed, the same
    answer as the row, measured natively, and not a column of another group's table."""
    return sorted((c for c in cells if c["status"] == "ok" and c.get(TIME_KEY) is not None
                   and not c.get("answer_differs") and not c.get("emulated")
                   and not c.get("column_group")),
                  key=lambda c: c[TIME_KEY])


def keras_speedups(summaries: list[CellSummary]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (row label, batch size): the best (fastest) Keras 3 environment and, where a Keras 2
    (tf-keras) cell of the row ran, its speedup = Keras 2 ÷ best Keras 3 (an environment effect,
    with its interval: `estimate`). Cells with a different answer are never the best. Empty
    unless the run has both kinds of environment."""
    groups = {table_group(s) for s in summaries}
    if not {KERAS3, KERAS2} <= groups:
        return {}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    _, rows, grid = pivot(summaries)
    for row in rows:
        cells = [s for (label, batch, _), s in grid.items() if (label, batch) == row]
        found = fastest([s for s in cells if table_group(s) == KERAS3])
        if found is None:
            continue
        best = found[0]
        entry = {"best_env": best["environment"], "best_backend": best.get("backend"),
                 "best_ms": best[TIME_KEY], "keras2_env": None, "keras2_ms": None,
                 "speedup": None, "estimate": None, "tf32_mixed": False}
        keras2 = fastest([s for s in cells if table_group(s) == KERAS2])
        if keras2:
            entry.update(keras2_env=keras2[0]["environment"], keras2_ms=keras2[0][TIME_KEY])
            estimate = speedup(keras2[0], best)
            entry.update(estimate=estimate, speedup=estimate.ratio)
        # Its Keras cells ran their dense paths differently: "best" compares other arithmetic.
        entry["tf32_mixed"] = any(tf32_differ(a, b) for a in cells for b in cells
                                  if {table_group(a), table_group(b)} <= {KERAS3, KERAS2})
        out[row] = entry
    return out
