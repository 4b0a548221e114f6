"""Summaries of raw step samples, computed on the host (never in a worker), and the warnings that
say when a summary should not be trusted.

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
- The **95 % confidence interval of the median is computed across repeats**, on the repeat
  medians, so it sees the process-to-process spread that an interval on pooled samples ignores
  (simulated with 2 % spread between processes and 100 steps per repeat, the pooled interval
  covered the true median 27–30 % of the time, less with more steps; tests/results/test_stats.py).
  From 6 repeats it is the distribution-free binomial order-statistic interval
  (`scipy.stats.quantile_test`), which always contains the headline. With 3 to 5 repeats no
  order-statistic interval reaches 95 % (with 5 values [min, max] is a 94 % interval), so it is a
  Student-t interval on the logarithms of the repeat medians (times are positive and vary by
  factors; t because with a handful of repeats the spread itself is uncertain); for n ≤ 6 such an
  interval always contains the median of the values. With fewer than 3 repeats there is no
  interval: the spread between processes is unknown.
- The **spread** (p10, p90, IQR, stdev, CV) is the typical process's: each repeat's own figure,
  then the median across repeats, so a repeat with more samples weighs no more. min and max are
  over every sample; `cv_repeats` (stdev / mean of the repeat medians) is the spread between
  processes. pyperf warns at a CV of 10 %, the bar here is 5 %.
- **Ratios between two cells** (`compare` of two runs, the effects of a run) are ratios of the
  geometric means of the repeat medians, with a **t interval on the logarithms from Welch's
  statistic** (the two cells' repeats are independent processes; their spreads need not be
  equal) **with min(n_a, n_b) − 1 degrees of freedom** (Hsu's conservative choice: with a
  handful of repeats Welch-Satterthwaite's degrees of freedom let identical cells with unequal
  spreads be called different more often than stated; this one holds its level). A bootstrap would need many more repeats than a run has: with 3 per side it
  can draw only 10 distinct resamples of each, and its interval is too narrow (simulated in
  tests/results/test_effects.py, the Welch interval covers the true ratio at its stated rate).
  Like the interval of one cell, it needs 3 repeats on each side.
- "**Repeats disagree**": Kruskal-Wallis across the repeats' samples, each repeat cut to the same
  number of values (its evenly spaced quantiles) so that no repeat weighs more in the ranks, plus
  a practical spread threshold on the repeat medians so that a statistically detectable but tiny
  shift is not flagged.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...worker.metadata import KEYS
from ...worker.protocol import ENERGY_RESOLUTION_UNKNOWN_S, ENERGY_WINDOW_RESOLUTIONS
from ..data.types import Record, StepSummary, Throughput
from ..formatting import fmt

CONFIDENCE = 0.95
CV_LIMIT = 0.05              # warn above this coefficient of variation (the typical repeat's)
MIN_WINDOW_S = 1.0           # warn when the timed window (or the energy window) is shorter
REPEAT_ALPHA = 0.01          # Kruskal-Wallis level for "repeats disagree"
REPEAT_SPREAD = 0.05         # ... and the repeat medians must differ by more than this


def summarize(samples_ms: list[float]) -> StepSummary:
    """median, mean, p10, p90, min, max and sample stdev of per-step times (ms)."""
    if not samples_ms:
        return StepSummary(median_ms=None, mean_ms=None, p10_ms=None, p90_ms=None, min_ms=None,
                           max_ms=None, stdev_ms=None)
    values = np.asarray(samples_ms, dtype=float)
    p10, median, p90 = np.percentile(values, [10, 50, 90])
    return StepSummary(
        median_ms=float(median),
        mean_ms=float(values.mean()),
        p10_ms=float(p10),
        p90_ms=float(p90),
        min_ms=float(values.min()),
        max_ms=float(values.max()),
        stdev_ms=float(values.std(ddof=1)) if len(values) > 1 else None,
    )


def throughput(record: Mapping[str, Any]) -> Throughput:
    """items/s and achieved TFLOP/s at the median step time."""
    median = record.get("median_ms")
    items, flops = record.get("items_per_step"), record.get("flops_per_step")
    if not median:
        return Throughput(items_per_s=None, achieved_tflops=None)
    return Throughput(
        items_per_s=items * 1000.0 / median if items else None,
        achieved_tflops=flops / (median / 1000.0) / 1e12 if flops else None,
    )


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


@dataclass(frozen=True)
class Ratio:
    """A ratio of two cells (numerator ÷ denominator of the geometric means of their repeat
    medians) with its interval. `low`/`high` are None where there is none, `why` says why."""

    ratio: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None        # Welch's t-test on the logs, two-sided
    log_se: float | None = None         # standard error of log(ratio)
    df: float | None = None             # Welch-Satterthwaite degrees of freedom
    why: str | None = None              # why no ratio or no interval

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def distinguishable(self) -> bool:
        """Whether the interval excludes 1 (no interval: never)."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)

    def scaled(self, factor: float) -> Ratio:
        """The ratio times a known constant (a ratio of times per step → per item), its interval
        and its test moved with it."""
        ratio, low, high, df = self.ratio, self.low, self.high, self.df
        if ratio is None:
            return self
        if low is None or high is None:
            return Ratio(ratio * factor, why=self.why)
        p = self.p_value
        if self.log_se and df is not None and math.isfinite(df):
            from scipy.stats import t

            p = float(2 * t.sf(abs(math.log(ratio * factor)) / self.log_se, df))
        elif self.log_se == 0:
            p = 1.0 if ratio * factor == 1 else 0.0
        return Ratio(ratio * factor, low * factor, high * factor, p, self.log_se, df)


def _log_spread(logs: list[float]) -> tuple[float, float]:
    """(mean, variance / n) of a side's log repeat medians."""
    return statistics.fmean(logs), statistics.variance(logs) / len(logs)


def welch_ratio(numerator: list[float], denominator: list[float],
                confidence: float = CONFIDENCE, min_repeats: int = MIN_CI_REPEATS) -> Ratio:
    """Ratio of the geometric means of two sets of repeat medians (numerator ÷ denominator),
    with a t interval on the logarithms and the two-sided p of its test; the interval (and p)
    only with `min_repeats` repeats on each side. Welch's statistic (each side's own spread)
    with min(n_a, n_b) − 1 degrees of freedom (Hsu's conservative choice) rather than
    Welch-Satterthwaite's: at the repeat counts runs use, Welch's degrees of freedom reject
    identical cells whose spreads differ more often than stated (3 against 3: 5.8 %, 2
    against 3: 8.3 %, simulated), min(n) − 1 never does, whatever the ratio of the spreads
    (tests/results/test_stats.py). No noise at all on either side: the interval is the ratio
    itself and p is 1 for equal sides, else 0."""
    top = [m for m in numerator if m is not None and m > 0]
    bottom = [m for m in denominator if m is not None and m > 0]
    if not top or not bottom:
        return Ratio(None, why="no ok repeat on " + ("either side" if not top and not bottom
                                                      else "one side"))
    logs_top, logs_bottom = [math.log(m) for m in top], [math.log(m) for m in bottom]
    ratio = math.exp(statistics.fmean(logs_top) - statistics.fmean(logs_bottom))
    if min(len(top), len(bottom)) < max(min_repeats, 2):
        return Ratio(ratio, why=f"too few repeats ({len(bottom)} and {len(top)}, an interval "
                                f"needs {max(min_repeats, 2)} on each side)")
    (mean_t, var_t), (mean_b, var_b) = _log_spread(logs_top), _log_spread(logs_bottom)
    variance = var_t + var_b
    if variance == 0:
        return Ratio(ratio, ratio, ratio, 1.0 if ratio == 1 else 0.0, 0.0, math.inf)
    df = min(len(top), len(bottom)) - 1
    return _t_interval(mean_t - mean_b, math.sqrt(variance), df, confidence)


def _t_interval(log_ratio: float, log_se: float, df: float, confidence: float) -> Ratio:
    from scipy.stats import t

    quantile = float(t.ppf(0.5 + confidence / 2, df))
    p = float(2 * t.sf(abs(log_ratio) / log_se, df))
    try:
        return Ratio(math.exp(log_ratio), math.exp(log_ratio - quantile * log_se),
                     math.exp(log_ratio + quantile * log_se), p, log_se, df)
    except OverflowError:       # repeats that differ by orders of magnitude
        return Ratio(math.exp(log_ratio), p_value=p, log_se=log_se, df=df,
                     why="the interval is too wide to state")


def geometric_mean_ratio(ratios: list[Ratio], confidence: float = CONFIDENCE) -> Ratio:
    """The geometric mean of several rows' ratios, with the interval of that mean from each
    row's own uncertainty (variance of the mean log ratio = Σ se² / k², Welch-Satterthwaite
    degrees of freedom): an interval for these rows' true geometric mean, not a prediction for
    other rows. The interval needs one on every row."""
    known = [r for r in ratios if r.ratio is not None]
    if not known:
        return Ratio(None, why="no row has a ratio")
    logs = [math.log(r.ratio) for r in known if r.ratio is not None]
    mean = statistics.fmean(logs)
    missing = [r for r in known if not r.has_interval]
    if missing:
        return Ratio(math.exp(mean), why=f"{len(missing)} of {len(known)} rows have no interval "
                                         f"({missing[0].why})")
    variances = [(r.log_se or 0.0) ** 2 for r in known]      # every row has an interval here
    if sum(variances) == 0:
        value = math.exp(mean)
        return Ratio(value, value, value, 1.0 if value == 1 else 0.0, 0.0, math.inf)
    denominator = sum(v ** 2 / r.df for v, r in zip(variances, known, strict=True)
                      if v and r.df is not None and math.isfinite(r.df))
    df = sum(variances) ** 2 / denominator if denominator else math.inf
    return _t_interval(mean, math.sqrt(sum(variances)) / len(known), df, confidence)


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


# Metadata that decides whether two measurements may be pooled or compared (GPU, driver, CUDA,
# framework version, lock hash, image digest, CPU model, ...): flagged in the metadata registry.
COMPARABILITY_KEYS = tuple(key for key, (_, decides) in KEYS.items() if decides)


def metadata_values(records: Sequence[Mapping[str, Any]],
                    keys: tuple[str, ...] = COMPARABILITY_KEYS) -> dict[str, set[str]]:
    """Every value each key (the comparability keys by default) took in these records (absent
    counts as None)."""
    values: dict[str, set[str]] = {key: set() for key in keys}
    for record in records:
        meta = record.get("metadata") or {}
        for key in keys:
            values[key].add(json.dumps(meta.get(key), sort_keys=True))
    return values


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
        out.append(f"{len(outliers)} timed sample(s) above 10× the median (a recompilation or "
                   f"a stall inside the timed window): {shown}{more}")
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
