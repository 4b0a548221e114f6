"""Summaries of raw step samples, computed on the host (never in a worker), and the warnings that
say when a summary should not be trusted.

Choices, and why:

- The headline is the median with the interquartile range (asv's habit): step times are skewed
  (a slow first step after a collection, a scheduler hiccup) and the median ignores a few outliers
  without removing any sample.
- The 95 % confidence interval of the median is the distribution-free binomial order-statistic
  interval on the pooled samples (`scipy.stats.quantile_test(...).confidence_interval`): it
  assumes nothing about the shape of the distribution, is exact rather than resampled (so the same
  samples always give the same interval, which recorded fixtures can check), and works from six
  samples up. A bootstrap across repeats would be the alternative, but with the usual 3 repeats it
  cannot say anything useful. What the pooled interval does not see is a shift between processes;
  that is what the "repeats disagree" warning is for (Kruskal-Wallis across the repeats' samples,
  plus a practical spread threshold so that a statistically detectable but tiny shift is not
  flagged).
- The coefficient of variation is the sample stdev over the mean of the pooled samples; pyperf
  warns at 10 %, the bar here is 5 %.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import numpy as np

from ..worker.metadata import KEYS

# The worker's telemetry module is standard library only, so the host may read its names.
from ..worker.monitor import SLOWDOWN_EVENTS

CONFIDENCE = 0.95
CV_LIMIT = 0.05              # warn above this coefficient of variation of the pooled samples
MIN_WINDOW_S = 1.0           # warn when the timed window (or the energy window) is shorter
REPEAT_ALPHA = 0.01          # Kruskal-Wallis level for "repeats disagree"
REPEAT_SPREAD = 0.05         # ... and the repeat medians must differ by more than this

SUMMARY_KEYS = ("median_ms", "mean_ms", "p10_ms", "p90_ms", "min_ms", "max_ms", "stdev_ms")


def summarize(samples_ms: list[float]) -> dict[str, float | None]:
    """median, mean, p10, p90, min, max and sample stdev of per-step times (ms)."""
    if not samples_ms:
        return dict.fromkeys(SUMMARY_KEYS)
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


def median_ci(samples_ms: list[float], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Distribution-free confidence interval of the median (binomial order statistics); (None,
    None) when there are too few samples for the requested confidence (fewer than 6 at 95 %)."""
    if len(samples_ms) < 2:
        return None, None
    from scipy.stats import quantile_test

    values = np.asarray(samples_ms, dtype=float)
    interval = quantile_test(values, q=float(np.median(values)), p=0.5).confidence_interval(confidence)
    low, high = float(interval.low), float(interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, None
    return low, high


def iqr(samples_ms: list[float]) -> float | None:
    if not samples_ms:
        return None
    q1, q3 = np.percentile(np.asarray(samples_ms, dtype=float), [25, 75])
    return float(q3 - q1)


def cv(samples_ms: list[float]) -> float | None:
    """Sample stdev / mean; None with fewer than two samples."""
    if len(samples_ms) < 2:
        return None
    mean = statistics.fmean(samples_ms)
    return statistics.stdev(samples_ms) / mean if mean else None


def repeats_disagree(per_repeat: list[list[float]], alpha: float = REPEAT_ALPHA,
                     spread: float = REPEAT_SPREAD) -> tuple[bool, float | None]:
    """(disagree, Kruskal-Wallis p) for the samples of each repeat. Both a significant test and
    a practical spread of the repeat medians are needed: with hundreds of samples the test alone
    flags differences far too small to matter."""
    groups = [np.asarray(g, dtype=float) for g in per_repeat if len(g) >= 2]
    if len(groups) < 2:
        return False, None
    if np.ptp(np.concatenate(groups)) == 0:  # every value identical: nothing to rank
        return False, None
    from scipy.stats import kruskal

    p = float(kruskal(*groups).pvalue)
    medians = [float(np.median(g)) for g in groups]
    wide = min(medians) > 0 and max(medians) / min(medians) - 1 > spread
    return (p < alpha and wide), p


def energy_of(record: dict[str, Any]) -> tuple[dict[str, float] | None, str | None]:
    """A record's energy over its timed window, per step and per item, where NVML's counter
    resolves it: (figures, None), or (None, why not). Never a zero that means "not measured"."""
    energy = record.get("gpu_energy_j")
    if energy is None:
        return None, None
    window = _window_s(record)
    if window is None or window < MIN_WINDOW_S:
        return None, (f"timed window {window or 0:.2f} s is shorter than NVML's energy counter "
                      f"resolves (needs ≥ {MIN_WINDOW_S:.0f} s: steps = \"auto\" or more steps)")
    if energy <= 0:
        return None, "NVML's energy counter did not advance over the timed window"
    steps = len(record.get("samples_ms") or []) * (record.get("calls_per_sample") or 1) \
        * (record.get("steps_per_call") or 1)
    items = record.get("items_per_step")
    figures = {"gpu_energy_j": energy,
               "energy_per_step_j": energy / steps if steps else None,
               "energy_per_item_j": energy / (steps * items) if steps and items else None}
    return figures, None


def _window_s(record: dict[str, Any]) -> float | None:
    """The energy counter's window: the telemetry window when recorded, else the timed loop."""
    window = (record.get("extra") or {}).get("telemetry_window_s")
    return window if window is not None else record.get("train_s")


# Metadata that decides whether two measurements may be pooled or compared (GPU, driver, CUDA,
# framework version, lock hash, image digest, CPU model, ...): flagged in the metadata registry.
COMPARABILITY_KEYS = tuple(key for key, (_, decides) in KEYS.items() if decides)


def metadata_values(records: list[dict[str, Any]],
                    keys: tuple[str, ...] = COMPARABILITY_KEYS) -> dict[str, set[str]]:
    """Every value each key (the comparability keys by default) took in these records (absent
    counts as None)."""
    values: dict[str, set[str]] = {key: set() for key in keys}
    for record in records:
        meta = record.get("metadata") or {}
        for key in keys:
            values[key].add(json.dumps(meta.get(key), sort_keys=True))
    return values


def warnings_for(ok_records: list[dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    """Why this cell's numbers deserve caution; empty when nothing is wrong."""
    out: list[str] = []
    if summary.get("cv") is not None and summary["cv"] > CV_LIMIT:
        out.append(f"CV {summary['cv'] * 100:.1f} % > {CV_LIMIT * 100:.0f} %")
    train = [r["train_s"] for r in ok_records if r.get("train_s") is not None]
    if train and min(train) < MIN_WINDOW_S:
        out.append(f"timed window {min(train):.2f} s < {MIN_WINDOW_S:.0f} s")
    energy_windows = [_window_s(r) for r in ok_records if r.get("gpu_energy_j") is not None]
    energy_windows = [w for w in energy_windows if w is not None]
    if energy_windows and min(energy_windows) < MIN_WINDOW_S:
        out.append(f"energy window {min(energy_windows):.2f} s < {MIN_WINDOW_S:.0f} s "
                   "(NVML energy counter too coarse)")
    outliers = [(r.get("repeat"), int(i)) for r in ok_records for i, _ in r.get("outliers") or []]
    if outliers:
        shown = ", ".join(f"r{rep}#{i}" for rep, i in outliers[:5])
        more = f" and {len(outliers) - 5} more" if len(outliers) > 5 else ""
        out.append(f"{len(outliers)} timed sample(s) above 10× the median (a recompilation or "
                   f"a stall inside the timed window): {shown}{more}")
    disagree, p = repeats_disagree([r.get("samples_ms") or [] for r in ok_records])
    if disagree:
        medians = summary.get("repeat_medians_ms") or []
        out.append(f"repeats disagree (Kruskal-Wallis p={p:.2g}, repeat medians "
                   f"{min(medians):.3g}–{max(medians):.3g} ms)")
    mixed = [key for key, values in metadata_values(ok_records).items() if len(values) > 1]
    if mixed:  # e.g. a run resumed after a driver or lock change: the pooled figure mixes setups
        out.append("repeats ran on different setups (" + ", ".join(mixed) + " differ)")
    slowdowns = sorted({e for r in ok_records for e in r.get("gpu_clock_events") or []}
                       & SLOWDOWN_EVENTS)
    if slowdowns:
        out.append("GPU clock slowdown: " + ", ".join(slowdowns))
    return out


def pooled(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Summary of one cell across its repeats: all raw samples pooled, plus the spread of the
    per-repeat medians (repeats run in separate processes, so that spread is the honest one)."""
    ok = [r for r in records if r.get("status") == "ok"]
    samples = [s for r in ok for s in r.get("samples_ms") or []]
    out: dict[str, Any] = summarize(samples)
    medians = [r["median_ms"] for r in ok if r.get("median_ms") is not None]
    out["repeats_ok"] = len(ok)
    out["repeats"] = len(records)
    out["samples"] = len(samples)
    out["repeat_medians_ms"] = medians
    out["cv_repeats"] = (statistics.stdev(medians) / statistics.mean(medians)
                         if len(medians) > 1 and statistics.mean(medians) else None)
    out["iqr_ms"] = iqr(samples)
    out["median_ci_low_ms"], out["median_ci_high_ms"] = median_ci(samples)
    out["cv"] = cv(samples)
    out["warnings"] = warnings_for(ok, out) if ok else []
    return out


# Compute efficiency. The peak is measured, never taken from a datasheet: the fastest matmul cell
# of the same run on the same device at the same compute precision (each environment's matmul
# uses the best library it has, so the fastest of them is the device's achievable peak).
PEAK_PRECISION = {"float32": "float32", "bfloat16": "bfloat16", "mixed_bfloat16": "bfloat16",
                  "mixed_float16": "float16"}


def device_name(record: dict[str, Any]) -> str | None:
    """The device a record computed on: the GPU model when it ran on the GPU, else the CPU's."""
    meta = record.get("metadata") or {}
    device = (record.get("effective") or {}).get("device")  # "cpu", "cuda:0", "/CPU:0", ...
    on_cpu = device is not None and "cpu" in str(device).lower()
    return meta.get("cpu_model") if on_cpu or not meta.get("gpu_name") else meta["gpu_name"]


def peak_kind(precision: Any, effective: dict[str, Any] | None) -> str | None:
    """What a peak is measured for: bfloat16, float16, float32, or tf32 (float32 inputs run on
    TF32 tensor cores: a different peak, so float32 cells say whether TF32 was in effect)."""
    kind = PEAK_PRECISION.get(precision)
    if kind == "float32" and (effective or {}).get("tf32"):
        return "tf32"
    return kind


def peaks_from(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fastest calibration per device and peak kind: [{device, kind, tflops, ...}]."""
    best: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in records:
        if r.get("status") != "ok" or not r.get("achieved_tflops"):
            continue
        key = (device_name(r), peak_kind(r.get("precision"), r.get("effective")))
        if key not in best or r["achieved_tflops"] > best[key]["tflops"]:
            best[key] = {"device": key[0], "kind": key[1], "tflops": r["achieved_tflops"],
                         "environment": r["environment"], "n": (r.get("options") or {}).get("n"),
                         "sizes": (r.get("extra") or {}).get("calibration")}
    return list(best.values())


def add_fraction_of_peak(summaries: list[dict[str, Any]],
                         peaks: list[dict[str, Any]] | None = None) -> None:
    """Set peak_tflops and fraction_of_peak on each summary from the run's calibration (the
    manifest's peaks; None without one: never from the cells themselves)."""
    table = {(p["device"], p["kind"]): p["tflops"] for p in peaks or []}
    for s in summaries:
        peak = table.get((s.get("device_name"), s.get("peak_kind")))
        s["peak_tflops"] = peak
        s["fraction_of_peak"] = (s["achieved_tflops"] / peak
                                 if peak and s.get("achieved_tflops") and s["status"] == "ok" else None)
