"""What a test could have seen: the smallest change between two cells that the ratio test
(ratios.welch_ratio: Welch's statistic on the logarithms of the repeat medians, min(n_A, n_B) − 1
degrees of freedom, two-sided at 5 %) detects with 80 % power, at the repeats and the spread
between processes the cells had; and, turned round, how many repeats a side a chosen change needs
at a machine's spread (`doctor --measure --detect`).

A "same" verdict is only as strong as this figure: at 3 against 3 repeats with a 2 % spread
between processes the test detects a true 5 % change 28 % of the time (the noncentral t here;
benchmarks/power.py simulates it), and a change must reach 9.4 % to be seen 80 % of the time.

The spread of a side is the standard deviation of the logarithms of its repeat medians (≈ the CV
of the repeat medians). With a handful of repeats it is itself a noisy estimate, and plugged in
as it is the stated change is seen far less than 80 % of the time: with 3 repeats, a cell's own
spread used for both sides, 58.6 % on average (benchmarks/power.py, "stated, plug-in"). So a
figure from measured spreads (`estimated_detectable`) uses each side's one-sided SPREAD_BOUND
upper confidence bound of its spread (chi-squared, repeats − 1 degrees of freedom): at the
change it then states, the test's real power averages 80.6 % with 3 repeats and 84.7 % with 10
("stated, bound"; more between two cells' own spreads). It is an estimate, and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from .stats import CONFIDENCE, MIN_CI_REPEATS

POWER = 0.8
ALPHA = 1 - CONFIDENCE
MOST_REPEATS = 100          # repeats_for looks no further
# The one-sided confidence of the upper bound of a measured spread (estimated_detectable): the
# lowest at which the real power at the stated change averages at least 80 % from 3 repeats.
SPREAD_BOUND = 0.7


def log_spread(medians: Sequence[float]) -> float | None:
    """The standard deviation of the logarithms of positive repeat medians (None below two)."""
    logs = [math.log(m) for m in medians if m and m > 0]
    return statistics.stdev(logs) if len(logs) >= 2 else None


def spread_bound(spread: float | None, repeats: int,
                 level: float = SPREAD_BOUND) -> float | None:
    """The one-sided `level` upper confidence bound of a spread measured from `repeats` values:
    s · √((n − 1) / χ²₁₋ₗₑᵥₑₗ(n − 1))."""
    if spread is None or repeats < 2:
        return None
    from scipy.stats import chi2

    return spread * math.sqrt((repeats - 1) / float(chi2.ppf(1 - level, repeats - 1)))


def estimated_detectable(medians_a: Sequence[float], medians_b: Sequence[float],
                         alpha: float = ALPHA) -> float | None:
    """detectable_change between two sets of repeat medians, each side's spread taken at its
    SPREAD_BOUND upper bound (see the module docstring): an estimate."""
    return detectable_change(spread_bound(log_spread(medians_a), len(medians_a)), len(medians_a),
                             spread_bound(log_spread(medians_b), len(medians_b)), len(medians_b),
                             alpha=alpha)


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
    """'no change larger than about 7.0 % would have gone unseen (80 % power, estimated)', or
    why none."""
    if change is None:
        return "what it could have seen is unknown (fewer than 3 repeats a side)"
    return (f"no change larger than about {change * 100:.3g} % would have gone unseen (80 % "
            f"power, estimated at the {SPREAD_BOUND * 100:.0f} % upper bound of the spread "
            "between processes)")
