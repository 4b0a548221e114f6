"""Change points (ruptures' PELT, then the t-test merge step) on simulated series: a known step
found at its run, a new level of two runs found at the end of a series, two steps found, a flat
noisy series left alone, a step under the practical threshold left alone (simulations, seeded)."""

from __future__ import annotations

import numpy as np
import pytest

from runner.history import changepoints


def simulate(seed: int, n: int = 20, step_at: int | None = None, step: float = 1.2,
             noise: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    level = np.where(np.arange(n) >= (step_at if step_at is not None else n), step, 1.0)
    return list(50.0 * level * np.exp(rng.normal(0.0, noise, n)))


def found(values: list[float], **options) -> list[int]:
    return [index for index, _ in changepoints.detect(values, **options)]


def test_a_known_step_is_found_at_its_run():
    exact = sum(found(simulate(seed, step_at=12)) == [12] for seed in range(100))
    assert exact >= 95, f"step found exactly at run 12 in {exact}/100 series"


def test_a_new_level_of_two_runs_is_found_at_the_end():
    # What `history regressions` gates on: the newest runs, a slowdown seen twice.
    exact = sum(found(simulate(seed, n=30, step_at=28, step=1.3, noise=0.02)) == [28]
                for seed in range(100))
    assert exact >= 95, f"step found at run 28 of 30 in {exact}/100 series"


def test_two_steps_are_both_found():
    rng = np.random.default_rng(7)
    level = np.concatenate([np.full(10, 1.0), np.full(10, 1.3), np.full(10, 0.9)])
    values = list(40.0 * level * np.exp(rng.normal(0.0, 0.02, 30)))
    assert found(values) == [10, 20]


def test_no_change_point_on_flat_noisy_series():
    false = sum(len(found(simulate(seed))) for seed in range(100))
    assert false <= 2, f"{false} false change points in 100 flat series"
    false = sum(len(found(simulate(seed, n=200))) for seed in range(20))
    assert false == 0, f"{false} false change points in 20 flat series of 200 runs"


def test_a_step_under_the_practical_threshold_is_not_reported():
    values = simulate(1, n=40, step_at=20, step=1.04, noise=0.002)   # 4 %, far beyond noise
    assert found(values) == []                          # under MIN_MAGNITUDE (5 %)
    assert found(values, min_magnitude=0.03) == [20]


def test_noiseless_series():
    assert found([10.0] * 12) == []
    assert found([10.0] * 6 + [12.0] * 6) == [6]


def test_the_cost_is_ruptures_own_l2_cost():
    # The cumulative-sum cost only makes PELT faster: the same values as ruptures' CostL2.
    from ruptures.costs import CostL2

    signal = np.random.default_rng(0).normal(size=50)
    ours, theirs = changepoints.squared_deviation_cost().fit(signal), CostL2().fit(signal)
    for start, end in ((0, 50), (3, 5), (10, 40), (48, 50)):
        assert ours.error(start, end) == pytest.approx(theirs.error(start, end), rel=1e-9)


def test_the_ratio_interval_covers_the_step():
    values = simulate(3, n=24, step_at=12, step=1.3)
    ratio, low, high = changepoints.ratio_interval(values[:12], values[12:])
    assert low < 1.3 < high and low < ratio < high
