"""Change points in a cell's series: PELT segmentation (ruptures; Killick, Fearnhead and
Eckley, "Optimal detection of changepoints with a linear computational cost", JASA 2012) on the
logs of the runs' medians, then a merge step that keeps only the change points a Welch t-test
and the practical threshold support (as Apache Otava, formerly Hunter, does after its
E-divisive search: Fleming et al., ICPE 2023).

Each run contributes one value per cell: its median step time (ms). A change point is the
first run of a new level. Runs of another method version (the worker code the cell runs:
runner/version.py) are not comparable: the series is cut where it changes, each stretch searched
on its own, and the cut is a method change, not a change point.

- Logs, because a slowdown is a ratio: 50 → 60 ms and 5 → 6 ms are the same change.
- The noise σ is estimated from the series itself, robustly: the median absolute difference of
  consecutive logs ÷ (0.6745 √2), which a few level shifts barely move. The series is divided by
  it, so the penalty below is in units of the series' own noise.
- PELT minimises the sum of squared deviations from each segment's mean plus PENALTY_PER_LOG_N
  × log(n) per change point (a BIC-like penalty: a change point costs a location and a new
  level; 3 rather than BIC's 2, because the merge step below tests what PELT proposes and a
  lower penalty only proposes more noise for it to reject). Segments hold at least 2 runs, so
  a new level is seen from its second run.
- The merge step: for every proposed change point, Student's t on the logs of the segment before
  against the segment after (pooled variance, as Otava's: the noise is the machine's, the same
  on both sides of a level shift, and the pooled n − 2 degrees of freedom let a new level of two
  runs be tested; Welch's t would have one); while one has p > max_pvalue, or a ratio under
  min_magnitude, the weakest is dropped and its neighbours tested again against their now
  longer segments.

Its size is the ratio of the level after to the level before, with a 95 % interval from Welch's
t on the logs of the two levels' values (runs are the units here, as repeats are within a
run). A change point is *new* when it lies within the newest `recent` runs of its series: that
is what `history regressions` gates on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .queries import Point, StackDiff

MAX_PVALUE = 0.001      # significance of a change point's t-test (Otava's default)
MIN_MAGNITUDE = 0.05    # a level shift under 5 % is not reported (compare's practical threshold)
MIN_SEGMENT = 2         # runs at a level before its change point can be tested
PENALTY_PER_LOG_N = 3.0  # PELT's penalty per change point, × log(n), in units of the noise
RECENT = 5              # a change point within the newest RECENT runs is new
NOISE_FLOOR = 1e-4      # σ of the logs below which a series counts as noiseless (0.01 %)


@dataclass
class ChangePoint:
    cell_name: str
    index: int                    # position in the series of ok points
    point: Point                  # the first run of the new level
    before_ms: float              # mean of the level before / after
    after_ms: float
    ratio: float                  # after / before (geometric, from the logs)
    ratio_low: float | None       # its 95 % interval
    ratio_high: float | None
    pvalue: float
    new: bool
    change: StackDiff | None      # the stack diff at that point

    @property
    def slower(self) -> bool:
        return self.ratio > 1

    @property
    def direction(self) -> str:
        return "slower" if self.slower else "faster"


def noise(logs: list[float]) -> float:
    """σ of the series' noise, from the median absolute consecutive difference."""
    import numpy as np

    steps = np.abs(np.diff(np.asarray(logs)))
    return max(float(np.median(steps)) / (0.6745 * math.sqrt(2)), NOISE_FLOOR)


def proposed(logs: list[float]) -> list[int]:
    """PELT's change points (the first index of each new segment) on the noise-scaled logs."""
    import numpy as np
    import ruptures

    signal = np.asarray(logs) / noise(logs)
    pelt = ruptures.Pelt(custom_cost=squared_deviation_cost(), min_size=MIN_SEGMENT, jump=1)
    ends = pelt.fit(signal).predict(pen=PENALTY_PER_LOG_N * math.log(len(logs)))
    return [int(end) for end in ends[:-1]]          # the last "end" is the series' length


def squared_deviation_cost() -> Any:
    """ruptures' "l2" cost (a segment's squared deviations from its mean) from cumulative sums:
    O(1) per segment where ruptures' own CostL2 takes the variance of the slice (a 200-run
    series: 0.2 s a cell with it, ~10 ms with this)."""
    import numpy as np
    from ruptures.base import BaseCost

    class SquaredDeviation(BaseCost):
        model = "l2"
        min_size = 1

        def fit(self, signal: Any) -> SquaredDeviation:
            self.signal = values = np.asarray(signal, dtype=float).reshape(len(signal))
            self.sums = np.concatenate([[0.0], np.cumsum(values)])
            self.squares = np.concatenate([[0.0], np.cumsum(values * values)])
            return self

        def error(self, start: int, end: int) -> float:
            total = self.sums[end] - self.sums[start]
            return float(self.squares[end] - self.squares[start] - total * total / (end - start))

    return SquaredDeviation()


def level_pvalue(before: list[float], after: list[float]) -> float:
    """Student's t-test p-value on two lists of logs (0 when both are constant and differ)."""
    from scipy.stats import ttest_ind

    if max(before) == min(before) and max(after) == min(after):
        return 0.0 if before[0] != after[0] else 1.0
    return float(ttest_ind(after, before).pvalue)


def detect(values: list[float], max_pvalue: float = MAX_PVALUE,
           min_magnitude: float = MIN_MAGNITUDE) -> list[tuple[int, float]]:
    """Indices where a new level starts, with the p-value of each."""
    if len(values) < 2 * MIN_SEGMENT:
        return []
    logs = [math.log(v) for v in values]
    found = proposed(logs)
    while found:
        bounds = [0, *found, len(logs)]
        tests = []
        for n, index in enumerate(found):
            before, after = logs[bounds[n]:index], logs[index:bounds[n + 2]]
            shift = abs(sum(after) / len(after) - sum(before) / len(before))
            small = math.exp(shift) - 1 < min_magnitude
            tests.append((small, level_pvalue(before, after)))
        weakest = max(range(len(found)), key=lambda n: tests[n])
        small, pvalue = tests[weakest]
        if not small and pvalue <= max_pvalue:
            return [(index, p) for index, (_, p) in zip(found, tests, strict=True)]
        del found[weakest]
    return []


def ratio_interval(before: list[float], after: list[float],
                   confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """(after/before, low, high) of the geometric means, Welch's t on the logs."""
    from scipy.stats import ttest_ind

    logs_b = [math.log(v) for v in before]
    logs_a = [math.log(v) for v in after]
    ratio = math.exp(sum(logs_a) / len(logs_a) - sum(logs_b) / len(logs_b))
    if len(logs_a) < 2 or len(logs_b) < 2:
        return ratio, None, None
    result = ttest_ind(logs_a, logs_b, equal_var=False)
    interval = result.confidence_interval(confidence)
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return ratio, None, None
    return ratio, math.exp(interval.low), math.exp(interval.high)


def change_points(cell_name: str, points: list[Point], recent: int = RECENT,
                  max_pvalue: float = MAX_PVALUE,
                  min_magnitude: float = MIN_MAGNITUDE) -> list[ChangePoint]:
    """The change points of a cell's series, sought within each stretch of one method version
    (method_segments): a level shift where the method changed is the method's, not the stack's,
    and the trend marks it as a method change instead."""
    ok = [p for p in points if p.status == "ok" and p.time_ms]
    out = []
    for start, end in method_segments(ok):
        values = [float(p.time_ms or 0) for p in ok[start:end]]      # every one is set
        found = detect(values, max_pvalue, min_magnitude)
        bounds = [0] + [i for i, _ in found] + [len(values)]
        for n, (index, pvalue) in enumerate(found):
            before, after = values[bounds[n]:index], values[index:bounds[n + 2]]
            ratio, low, high = ratio_interval(before, after)
            at = start + index
            out.append(ChangePoint(cell_name, at, ok[at], sum(before) / len(before),
                                   sum(after) / len(after), ratio, low, high, pvalue,
                                   new=at >= len(ok) - recent, change=ok[at].change))
    return out


def method_segments(points: list[Point]) -> list[tuple[int, int]]:
    """(start, end) of each stretch of consecutive points of one method version."""
    starts = [0] + [i for i in range(1, len(points))
                    if points[i].method_version != points[i - 1].method_version]
    return list(zip(starts, starts[1:] + [len(points)], strict=True)) if points else []


def method_changes(points: list[Point]) -> list[Point]:
    """The ok points measured by another method version than the ok point before them."""
    ok = [p for p in points if p.status == "ok" and p.time_ms]
    return [ok[start] for start, _ in method_segments(ok)[1:]]
