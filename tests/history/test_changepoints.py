"""Otava's change points on simulated series: a known step found at its run, a flat noisy
series left alone (a simulation, seeded)."""

from __future__ import annotations

import numpy as np

from runner.history import changepoints


def simulate(seed: int, n: int = 20, step_at: int | None = None, step: float = 1.2,
             noise: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    level = np.where(np.arange(n) >= (step_at if step_at is not None else n), step, 1.0)
    return list(50.0 * level * np.exp(rng.normal(0.0, noise, n)))


def test_a_known_step_is_found_at_its_run():
    found_at = [changepoints.detect(simulate(seed, step_at=12)) for seed in range(100)]
    exact = sum(1 for cps in found_at if [i for i, _ in cps] == [12])
    assert exact >= 95, f"step found exactly at run 12 in {exact}/100 series"


def test_no_change_point_on_flat_noisy_series():
    false = sum(len(changepoints.detect(simulate(seed))) for seed in range(100))
    assert false <= 2, f"{false} false change points in 100 flat series"


def test_the_ratio_interval_covers_the_step():
    values = simulate(3, n=24, step_at=12, step=1.3)
    ratio, low, high = changepoints.ratio_interval(values[:12], values[12:])
    assert low < 1.3 < high and low < ratio < high
