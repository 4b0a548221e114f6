"""Ratios between two cells (`compare` of two runs, the effects of a run) and the geometric mean
of several rows' ratios, each with its interval and test. The unit is the repeat, as for one
cell's statistics (stats.py says why).

A ratio is the ratio of the geometric means of the repeat medians, with a **t interval on the
logarithms from Welch's statistic** (the two cells' repeats are independent processes; their
spreads need not be equal) **with min(n_a, n_b) − 1 degrees of freedom** (Hsu's conservative
choice: with a handful of repeats Welch-Satterthwaite's degrees of freedom let identical cells
with unequal spreads be called different more often than stated; this one holds its level). A
bootstrap would need many more repeats than a run has: with 3 per side it can draw only 10
distinct resamples of each, and its interval is too narrow (simulated in
tests/results/analysis/test_effects.py, the Welch interval covers the true ratio at its stated
rate). Like the interval of one cell, it needs 3 repeats on each side.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .stats import CONFIDENCE, MIN_CI_REPEATS


@dataclass(frozen=True)
class Ratio:
    """A ratio of two cells (numerator ÷ denominator of the geometric means of their repeat
    medians) with its interval. `low`/`high` are None where there is none, `why` says why."""

    ratio: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None        # Welch's t-test on the logs, two-sided
    log_se: float | None = None         # standard error of log(ratio)
    # degrees of freedom: min(n_a, n_b) − 1 for a ratio (welch_ratio); for a geometric mean of
    # rows, the Welch–Satterthwaite combination of its rows' (geometric_mean_ratio)
    df: float | None = None
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
    (tests/results/analysis/test_stats.py). No noise at all on either side: the interval is the
    ratio itself and p is 1 for equal sides, else 0."""
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
        # The row's own reason alone where no row has one: it is said inside "(no interval: …)"
        why = missing[0].why if len(missing) == len(known) else \
            f"{len(missing)} of {len(known)} rows have none — {missing[0].why}"
        return Ratio(math.exp(mean), why=why)
    variances = [(r.log_se or 0.0) ** 2 for r in known]      # every row has an interval here
    if sum(variances) == 0:
        value = math.exp(mean)
        return Ratio(value, value, value, 1.0 if value == 1 else 0.0, 0.0, math.inf)
    denominator = sum(v ** 2 / r.df for v, r in zip(variances, known, strict=True)
                      if v and r.df is not None and math.isfinite(r.df))
    df = sum(variances) ** 2 / denominator if denominator else math.inf
    return _t_interval(mean, math.sqrt(sum(variances)) / len(known), df, confidence)
