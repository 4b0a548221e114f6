"""A cell's summary across its repeats, computed on the host (never in a worker), and the warnings
that say when a summary should not be trusted. Each repeat's own figures are its record's
(data/records.py summarize); ratios between two cells and their intervals are ratios.py's.

The unit of every statistic of a cell is the repeat: a fresh process (or container) with its own
allocator, clocks, placement and compilation. Steps of one process share that state, so they are
not independent samples of the cell, and a repeat that happened to take more samples (a shorter
block, a longer timed window) must not count for more. Choices, and why:

- Each repeat is summarised by its own median step time (step times are skewed: a slow step
  after a collection, a scheduler hiccup), so every repeat weighs the same whatever its sample
  count (200/50/50 samples at 1.00/1.10/1.10 ms give 1.10, where the pooled median gave 1.00).
- **One estimator for every comparison**: the cell's time is the **geometric mean of its repeat
  medians** (`geomean_ms`), the centre of the log-scale ratios and their intervals, so the
  tables, their bold, the fastest counts and the ratios all rank by the same number (a table
  ranking by the median of the repeat medians could bold a cell that its ratio calls slower).
  `median_ms`, the median of the repeat medians, stays a description of one cell (one aberrant
  process of three cannot move it).
- The **95 % confidence interval is computed across repeats** (`median_ci_*` by its old name),
  on the repeat medians, so it sees the process-to-process spread that an interval on pooled samples ignores
  (simulated with 2 % spread between processes and 100 steps per repeat, the pooled interval
  covered the true median 27–30 % of the time, less with more steps;
  tests/results/analysis/test_stats.py). From 6 repeats it is the distribution-free binomial
  order-statistic interval of their median (`scipy.stats.quantile_test`). With 3 to 5 repeats no
  order-statistic interval reaches 95 % (with 5 values [min, max] is a 94 % interval), so it is a
  Student-t interval on the logarithms of the repeat medians (times are positive and vary by
  factors; t because with a handful of repeats the spread itself is uncertain): an interval
  around their geometric mean, the cell's time, and the report labels it so. With fewer than 3 repeats
  there is no interval: the spread between processes is unknown.
- The **spread** (p10, p90, IQR, stdev, CV) is the typical process's: each repeat's own figure,
  then the median across repeats, so a repeat with more samples weighs no more. min and max are
  over every sample; `cv_repeats` (stdev / mean of the repeat medians) is the spread between
  processes. pyperf warns at a CV of 10 %, the bar here is 5 %.
- "**Repeats disagree**": Kruskal-Wallis across the repeats' samples, each repeat cut to the same
  number of values (its evenly spaced quantiles) so that no repeat weighs more in the ranks, plus
  a practical spread threshold on the repeat medians so that a statistically detectable but tiny
  shift is not flagged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...worker.protocol import ENERGY_RESOLUTION_UNKNOWN_S, ENERGY_WINDOW_RESOLUTIONS
from ..data.records import summarize
from ..data.types import Record
from ..formatting import fmt
from .comparability import metadata_values

CONFIDENCE = 0.95
CV_LIMIT = 0.05              # warn above this coefficient of variation (the typical repeat's)
MIN_WINDOW_S = 1.0           # warn when the timed window (or the energy window) is shorter
REPEAT_ALPHA = 0.01          # Kruskal-Wallis level for "repeats disagree"
REPEAT_SPREAD = 0.05         # ... and the repeat medians must differ by more than this
MIN_CI_REPEATS = 3          # fewer repeats: no interval ("–, too few repeats")
ORDER_STATISTIC_REPEATS = 6  # from here a distribution-free interval reaches 95 %


def median_ci(repeat_medians: list[float],
              confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Confidence interval of the cell's median across repeats, from the repeat medians: the
    binomial order-statistic interval from 6 repeats, a Student-t interval on the logs with 3 to
    5 (see the module docstring); (None, None) with fewer than 3 or a non-positive median."""
    values = np.asarray([m for m in repeat_medians if m is not None], dtype=float)
    if len(values) < MIN_CI_REPEATS or not np.all(values > 0):
        return None, None
    if len(values) >= ORDER_STATISTIC_REPEATS:
        from scipy.stats import quantile_test

        interval = quantile_test(values, q=float(np.median(values)), p=0.5) \
            .confidence_interval(confidence)
        low, high = float(interval.low), float(interval.high)
    else:
        from scipy.stats import t

        logs = np.log(values)
        quantile = float(t.ppf(0.5 + confidence / 2, len(logs) - 1))
        half = quantile * logs.std(ddof=1) / math.sqrt(len(logs))
        low, high = math.exp(logs.mean() - half), math.exp(logs.mean() + half)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, None
    return low, high


def repeat_medians(records: list[Record]) -> list[float]:
    """Each repeat's median step time (ms), the unit of every comparison; a repeat without a
    positive median is no measurement (a ratio or a log of it means nothing)."""
    medians = (statistics.median(r["samples_ms"]) for r in records if r.get("samples_ms"))
    return [m for m in medians if m > 0]


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


def equal_sized(groups: list[np.ndarray]) -> list[np.ndarray]:
    """Each group cut to the size of the smallest: its values at evenly spaced quantiles
    (inverted CDF: actual sample values; a group of that size is returned as it is)."""
    size = min(len(g) for g in groups)
    where = (np.arange(size) + 0.5) / size
    return [g if len(g) == size else np.quantile(g, where, method="inverted_cdf") for g in groups]


def repeats_disagree(per_repeat: list[list[float]], alpha: float = REPEAT_ALPHA,
                     spread: float = REPEAT_SPREAD) -> tuple[bool, float | None]:
    """(disagree, Kruskal-Wallis p) for the samples of each repeat, each repeat weighing the
    same (cut to the smallest repeat's count). Both a significant test and a practical spread of
    the repeat medians are needed: with hundreds of samples the test alone flags differences far
    too small to matter."""
    groups = [np.asarray(g, dtype=float) for g in per_repeat if len(g) >= 2]
    if len(groups) < 2:
        return False, None
    medians = [float(np.median(g)) for g in groups]
    groups = equal_sized(groups)
    if np.ptp(np.concatenate(groups)) == 0:  # every value identical: nothing to rank
        return False, None
    from scipy.stats import kruskal

    p = float(kruskal(*groups).pvalue)
    wide = min(medians) > 0 and max(medians) / min(medians) - 1 > spread
    return (p < alpha and wide), p


def energy_window_needed(record: Mapping[str, Any]) -> float:
    """The shortest window whose energy NVML's counter resolves: ENERGY_WINDOW_RESOLUTIONS of
    its update interval as the worker measured it (a guess where it could not), never under
    MIN_WINDOW_S. Not min_time: a window of min_time's 1 s read a counter that moves every
    0.1 s to ±10 %."""
    resolution = record.get("gpu_energy_resolution_s") or ENERGY_RESOLUTION_UNKNOWN_S
    return max(MIN_WINDOW_S, ENERGY_WINDOW_RESOLUTIONS * resolution)


def energy_of(record: Mapping[str, Any]) -> tuple[dict[str, float] | None, str | None]:
    """A record's energy over its timed window, per step and per item, and per step above the
    device's idle power, where NVML's counter resolves it: (figures, None), or (None, why not).
    Never a zero that means "not measured"."""
    energy = record.get("gpu_energy_j")
    if energy is None:
        return None, None
    if (record.get("devices") or 1) > 1:
        return None, ("a data-parallel cell: NVML's counter was read on its first GPU only "
                      "(each DDP rank's in extra.ranks; docs/scaling.md)")
    window, needed = _window_s(record), energy_window_needed(record)
    if window is None or window < needed:
        return None, (f"timed window {fmt(window or 0)} s is shorter than NVML's energy counter "
                      f"resolves (needs ≥ {fmt(needed)} s, {ENERGY_WINDOW_RESOLUTIONS} of its "
                      "update interval: steps = \"auto\" or more steps)")
    if energy <= 0:
        return None, "NVML's energy counter did not advance over the timed window"
    steps = len(record.get("samples_ms") or []) * (record.get("calls_per_sample") or 1) \
        * (record.get("steps_per_call") or 1)
    items, idle = record.get("items_per_step"), record.get("gpu_idle_power_w")
    figures = {"gpu_energy_j": energy,
               "energy_per_step_j": energy / steps if steps else None,
               "energy_per_item_j": energy / (steps * items) if steps and items else None,
               "energy_per_step_above_idle_j": (energy - idle * window) / steps
               if steps and idle is not None else None}
    return figures, None


def _window_s(record: Mapping[str, Any]) -> float | None:
    """The energy counter's window: the telemetry window when recorded, else the timed loop."""
    window = (record.get("extra") or {}).get("telemetry_window_s")
    return window if window is not None else record.get("train_s")


def warnings_for(ok_records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                 cv_limit: float | None = None) -> list[str]:
    """Why this cell's numbers deserve caution; empty when nothing is wrong. What the machine
    did meanwhile (throttling, other load, clocks, settle) is conditions.py's. The CV is judged
    against `cv_limit` where this machine's own is known (its machine profile), else CV_LIMIT."""
    out: list[str] = []
    limit = max(CV_LIMIT, cv_limit) if cv_limit is not None else CV_LIMIT
    if summary.get("cv") is not None and summary["cv"] > limit:
        own = limit > CV_LIMIT
        out.append(f"CV {fmt(summary['cv'] * 100)} % > "
                   + (f"{fmt(limit * 100)} % (this machine's, from its machine profile)" if own
                      else f"{CV_LIMIT * 100:.0f} %"))
    train = [r["train_s"] for r in ok_records if r.get("train_s") is not None]
    if train and min(train) < MIN_WINDOW_S:
        out.append(f"timed window {fmt(min(train))} s < {MIN_WINDOW_S:.0f} s")
    short = [(w, energy_window_needed(r)) for r in ok_records
             if r.get("gpu_energy_j") is not None and (w := _window_s(r)) is not None
             and w < energy_window_needed(r)]
    if short:
        window, needed = min(short)
        out.append(f"energy window {fmt(window)} s < {fmt(needed)} s "
                   "(NVML energy counter too coarse)")
    outliers = [(r.get("repeat"), int(i)) for r in ok_records for i, _ in r.get("outliers") or []]
    if outliers:
        shown = ", ".join(f"r{rep}#{i}" for rep, i in outliers[:5])
        more = f" and {len(outliers) - 5} more" if len(outliers) > 5 else ""
        out.append(f"{len(outliers)} timed sample(s) above the median by a stall (a call of "
                   f"10× the median call or more: a recompilation or a stall inside the timed "
                   f"window): {shown}{more}")
    blocks = [(r.get("repeat"), b) for r in ok_records
              if isinstance(b := (r.get("extra") or {}).get("block_short"), dict)]
    if blocks:
        block = blocks[0][1]
        out.append(f"block of {block.get('calls_per_sample')} call(s) too short: median sample "
                   f"{fmt(block.get('median_sample_ms'))} ms, under a quarter of its "
                   f"{fmt(block.get('target_ms'))} ms target in "
                   + ", ".join(f"r{rep}" for rep, _ in blocks)
                   + " (the calibration that chose it was disturbed; run the cell again)")
    disagree, p = repeats_disagree([r.get("samples_ms") or [] for r in ok_records])
    if disagree:
        medians = summary.get("repeat_medians_ms") or []
        out.append(f"repeats disagree (Kruskal-Wallis p={p:.2g}, repeat medians "
                   f"{fmt(min(medians))}–{fmt(max(medians))} ms)")
    mixed = [key for key, values in metadata_values(ok_records).items() if len(values) > 1]
    if mixed:  # e.g. a run resumed after a driver or lock change: the cell's figure mixes setups
        out.append("repeats ran on different setups (" + ", ".join(mixed) + " differ)")
    return out


def _median_of(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def across_repeats(records: Sequence[Mapping[str, Any]],
                   cv_limit: float | None = None) -> dict[str, Any]:
    """Summary of one cell with the repeat as the unit (see the module docstring): the median
    of the repeat medians, the interval across repeats, each repeat's spread then the median
    across repeats; failed repeats are counted, never summarised. `cv_limit`: this machine's
    own CV (warnings_for)."""
    ok = [r for r in records if r.get("status") == "ok"]
    per_repeat = [list(r["samples_ms"]) for r in ok if r.get("samples_ms")]
    each = [summarize(samples) for samples in per_repeat]
    # Every repeat here has samples, so its summary has every figure but maybe the stdev.
    medians = [m for e in each if (m := e["median_ms"]) is not None]
    out: dict[str, Any] = {
        "median_ms": _median_of(medians),
        # The estimator every comparison uses (tables, bold, fastest, ratios): one per run.
        "geomean_ms": math.exp(statistics.fmean(math.log(m) for m in medians))
        if medians and min(medians) > 0 else None,
        "mean_ms": statistics.fmean(m for e in each if (m := e["mean_ms"]) is not None)
        if each else None,
        "p10_ms": _median_of([e["p10_ms"] for e in each]),
        "p90_ms": _median_of([e["p90_ms"] for e in each]),
        "min_ms": min((m for e in each if (m := e["min_ms"]) is not None), default=None),
        "max_ms": max((m for e in each if (m := e["max_ms"]) is not None), default=None),
        "stdev_ms": _median_of([e["stdev_ms"] for e in each]),
    }
    out["repeats_ok"] = len(ok)
    out["repeats"] = len(records)
    out["samples"] = sum(len(s) for s in per_repeat)
    out["repeat_medians_ms"] = medians
    out["cv_repeats"] = (statistics.stdev(medians) / statistics.mean(medians)
                         if len(medians) > 1 and statistics.mean(medians) else None)
    out["iqr_ms"] = _median_of([iqr(s) for s in per_repeat])
    out["median_ci_low_ms"], out["median_ci_high_ms"] = median_ci(medians)
    out["cv"] = _median_of([cv(s) for s in per_repeat])
    out["warnings"] = warnings_for(ok, out, cv_limit) if ok else []
    return out
