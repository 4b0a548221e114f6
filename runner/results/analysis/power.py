"""What a test could have seen: the smallest change between two cells that the ratio test
(ratios.welch_ratio: Welch's statistic on the logarithms of the repeat medians, min(n_A, n_B) − 1
degrees of freedom, two-sided at 5 %) detects with 80 % power, at the repeats and the spread
between processes the cells had; and, turned round, how many repeats a side a chosen change needs
at a machine's spread (`doctor --measure --detect`).

A "same" verdict is only as strong as this figure: at 3 against 3 repeats with a 2 % spread
between processes the test detects a true 5 % change 28 % of the time (the noncentral t here;
benchmarks/power.py simulates it), and a change must reach about 11 % to be seen 80 % of the
time. The
spread of a side is the standard deviation of the logarithms of its repeat medians (≈ the CV of
the repeat medians); with a handful of repeats it is itself a rough estimate, so the figure is
one too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from .stats import CONFIDENCE, MIN_CI_REPEATS

POWER = 0.8
ALPHA = 1 - CONFIDENCE
MOST_REPEATS = 100          # repeats_for looks no further


def log_spread(medians: Sequence[float]) -> float | None:
    """The standard deviation of the logarithms of positive repeat medians (None below two)."""
    logs = [math.log(m) for m in medians if m and m > 0]
    return statistics.stdev(logs) if len(logs) >= 2 else None


def power_of(change: float, log_se: float, df_test: float, df_statistic: float,
             alpha: float = ALPHA) -> float:
    """The chance that the two-sided test calls a true ratio of 1 + change different: its
    statistic is Welch's (a noncentral t with Welch–Satterthwaite's `df_statistic`, the two
    sides' spreads estimated from their repeats; `log_se` its true standard error on the log
    scale), judged against the critical value of `df_test` = min(n_A, n_B) − 1 degrees of
    freedom, the conservative choice that holds the test's level."""
    from scipy.stats import nct, t

    critical = float(t.ppf(1 - alpha / 2, df_test))
    shift = math.log1p(change) / log_se
    found = float(nct.sf(critical, df_statistic, shift) + nct.cdf(-critical, df_statistic, shift))
    # SciPy's noncentral t gives NaN far in its tail (a shift of many standard errors): there
    # the test all but always sees the change.
    return found if math.isfinite(found) else float(abs(shift) > critical)


def detectable_change(spread_a: float | None, repeats_a: int, spread_b: float | None,
                      repeats_b: int, power: float = POWER, alpha: float = ALPHA) -> float | None:
    """The smallest true change (a fraction: 0.07 for 7 %) the ratio test detects with `power`
    at these spreads (log_spread) and repeat counts; None where the test has no interval (fewer
    than MIN_CI_REPEATS repeats a side) or a spread is unknown; 0 with no spread at all."""
    if min(repeats_a, repeats_b) < MIN_CI_REPEATS or spread_a is None or spread_b is None:
        return None
    log_se = math.sqrt(spread_a ** 2 / repeats_a + spread_b ** 2 / repeats_b)
    if log_se == 0:
        return 0.0
    from scipy.optimize import brentq

    va, vb = spread_a ** 2 / repeats_a, spread_b ** 2 / repeats_b
    df_test = min(repeats_a, repeats_b) - 1
    df_statistic = (va + vb) ** 2 / (va ** 2 / (repeats_a - 1) + vb ** 2 / (repeats_b - 1)) \
        if va or vb else math.inf

    def short(shift: float) -> float:
        return power_of(math.expm1(shift * log_se), log_se, df_test, df_statistic, alpha) - power

    low, high = 0.0, 1.0
    while short(high) < 0:
        low, high = high, high * 2
        if high > 1e6:
            return None
    return math.expm1(brentq(short, low, high, xtol=1e-9) * log_se)


def repeats_for(spread: float, change: float, power: float = POWER,
                alpha: float = ALPHA) -> int | None:
    """The fewest repeats a side (from MIN_CI_REPEATS) at which the test detects `change` with
    `power` when both sides have `spread` between processes; None beyond MOST_REPEATS."""
    for repeats in range(MIN_CI_REPEATS, MOST_REPEATS + 1):
        found = detectable_change(spread, repeats, spread, repeats, power, alpha)
        if found is not None and found <= change:
            return repeats
    return None


def unseen_text(change: float | None) -> str:
    """'no change larger than 7.0 % would have gone unseen (80 % power)', or why none."""
    if change is None:
        return "what it could have seen is unknown (fewer than 3 repeats a side)"
    return f"no change larger than {change * 100:.3g} % would have gone unseen (80 % power)"
