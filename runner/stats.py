"""Summaries of raw step samples, computed on the host (never in a worker)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np


def summarize(samples_ms: list[float]) -> dict[str, float | None]:
    """median, mean, p10, p90, min, max and sample stdev of per-step times (ms)."""
    if not samples_ms:
        return dict.fromkeys(("median_ms", "mean_ms", "p10_ms", "p90_ms", "min_ms", "max_ms",
                              "stdev_ms"))
    values = np.asarray(samples_ms, dtype=float)
    p10, median, p90 = np.percentile(values, [10, 50, 90])
    return {
        "median_ms": float(median),
        "mean_ms": float(values.mean()),
        "p10_ms": float(p10),
        "p90_ms": float(p90),
        "min_ms": float(values.min()),
        "max_ms": float(values.max()),
        "stdev_ms": float(values.std(ddof=1)) if len(values) > 1 else None,
    }


def throughput(record: dict[str, Any]) -> dict[str, float | None]:
    """items/s and achieved TFLOP/s at the median step time."""
    median = record.get("median_ms")
    items, flops = record.get("items_per_step"), record.get("flops_per_step")
    if not median:
        return {"items_per_s": None, "achieved_tflops": None}
    return {
        "items_per_s": items * 1000.0 / median if items else None,
        "achieved_tflops": flops / (median / 1000.0) / 1e12 if flops else None,
    }


def pooled(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Summary of one cell across its repeats: all raw samples pooled, plus the spread of the
    per-repeat medians (repeats run in separate processes, so that spread is the honest one)."""
    ok = [r for r in records if r.get("status") == "ok"]
    samples = [s for r in ok for s in r.get("samples_ms") or []]
    out: dict[str, Any] = summarize(samples)
    medians = [r["median_ms"] for r in ok if r.get("median_ms") is not None]
    out["repeats_ok"] = len(ok)
    out["repeats"] = len(records)
    out["repeat_medians_ms"] = medians
    out["cv_repeats"] = (statistics.stdev(medians) / statistics.mean(medians)
                         if len(medians) > 1 and statistics.mean(medians) else None)
    return out
