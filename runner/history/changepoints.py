"""Change points in a cell's series, by Apache Otava (formerly Hunter; MongoDB's E-divisive
means with a t-test merge step, built for performance series: Fleming et al., "Hunter: Using
Change Point Detection to Hunt for Performance Regressions", ICPE 2023).

Each run contributes one value per cell: its median step time (ms). A change point is the
first run of a new level. Its size is the ratio of the level after to the level before, with a
95 % interval from Welch's t on the logs of the two levels' values (runs are the units here, as
repeats are within a run). A change point is *new* when it lies within the newest `recent` runs
of its series: that is what `history regressions` gates on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .queries import Point, StackDiff

MAX_PVALUE = 0.001      # Otava's default significance for the final change points
MIN_MAGNITUDE = 0.05    # a level shift under 5 % is not reported (compare's practical threshold)
WINDOW = 30             # Otava's sliding window (points)
RECENT = 5              # a change point within the newest RECENT runs is new


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


def detect(values: list[float], max_pvalue: float = MAX_PVALUE,
           min_magnitude: float = MIN_MAGNITUDE, window: int = WINDOW) -> list[tuple[int, float]]:
    """Indices where a new level starts, with Otava's p-value each."""
    if len(values) < 3:
        return []
    from otava.analysis import compute_change_points

    found, _ = compute_change_points(list(values), window_len=window, max_pvalue=max_pvalue,
                                     min_magnitude=min_magnitude)
    return [(cp.index, float(cp.stats.pvalue)) for cp in found]


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
    ok = [p for p in points if p.status == "ok" and p.median_ms]
    values = [float(p.median_ms or 0) for p in ok]       # every one is set (filtered above)
    found = detect(values, max_pvalue, min_magnitude)
    bounds = [0] + [i for i, _ in found] + [len(ok)]
    out = []
    for n, (index, pvalue) in enumerate(found):
        before, after = values[bounds[n]:index], values[index:bounds[n + 2]]
        ratio, low, high = ratio_interval(before, after)
        out.append(ChangePoint(cell_name, index, ok[index], sum(before) / len(before),
                               sum(after) / len(after), ratio, low, high, pvalue,
                               new=index >= len(ok) - recent, change=ok[index].change))
    return out
