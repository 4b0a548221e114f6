"""What the ratio test can see: its level and its power, simulated and computed.

    .venv/bin/python benchmarks/power.py [--draws 20000] [--spread 0.02] [--change 0.05]

For repeats a side from 3 to 10, draws pairs of cells whose repeat medians scatter log-normally
around their true time with `--spread` between processes, and runs the ratio test every
comparison uses (runner/results/analysis/ratios.py welch_ratio: Welch's statistic on the
logarithms, min(n_A, n_B) − 1 degrees of freedom, two-sided at 5 %):

- level: how often two cells of the same true time are called different (the test promises at
  most 5 %);
- power: how often a true change of `--change` is called, beside what power.py computes for it
  (the noncentral t the report's "detectable change" and compare's "no change larger than …
  would have gone unseen" come from), and that detectable change (80 % power) itself;
- the repeats a side `doctor --measure --detect` would recommend for `--change`;
- the real power at the change a cell states (the report's detectable change, its own spread
  used for both sides), averaged over `--stated` draws of its repeats: "stated, plug-in" with
  the spread as measured, "stated, bound" at the spread's power.SPREAD_BOUND upper bound, which
  the report uses. With the defaults and --draws 4000 --stated 600 (seed 49): 58.6 % against
  80.6 % at 3 repeats, 74.0 % against 84.7 % at 10.

A benchmark script: it prints, it does not assert (tests/results/analysis/test_compare.py holds
the figures the issue quotes). Seeded: the same draws every time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner.results.analysis import power  # noqa: E402
from runner.results.analysis.ratios import welch_ratio  # noqa: E402


def called(rng: np.random.Generator, repeats: int, spread: float, change: float,
           draws: int) -> float:
    """The share of `draws` pairs the test calls different (p < 0.05) at a true ratio of
    1 + change."""
    hits = 0
    for _ in range(draws):
        a = np.exp(rng.normal(0.0, spread, repeats))
        b = (1 + change) * np.exp(rng.normal(0.0, spread, repeats))
        p = welch_ratio(list(b), list(a)).p_value
        hits += p is not None and p < power.ALPHA
    return hits / draws


def stated_power(rng: np.random.Generator, repeats: int, spread: float,
                 draws: int) -> tuple[float, float]:
    """The test's mean real power at the change a cell states from its own measured spread:
    (as measured, at the upper bound the report uses)."""
    se = (2 * spread ** 2 / repeats) ** 0.5
    plug, bound = [], []
    for _ in range(draws):
        medians = list(np.exp(rng.normal(0.0, spread, repeats)))
        measured = power.log_spread(medians)
        for stated, out in ((power.detectable_change(measured, repeats, measured, repeats), plug),
                            (power.estimated_detectable(medians, medians), bound)):
            out.append(power.power_of(stated, se, repeats - 1, 2 * repeats - 2))
    return float(np.mean(plug)), float(np.mean(bound))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--spread", type=float, default=0.02,
                        help="spread between processes (standard deviation of log medians)")
    parser.add_argument("--change", type=float, default=0.05, help="the true change, 0.05 = 5 %%")
    parser.add_argument("--stated", type=int, default=1000,
                        help="draws of a cell's repeats for the stated change's real power")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(49)
    print(f"spread between processes {args.spread * 100:g} %, true change "
          f"{args.change * 100:g} %, {args.draws} draws per line, alpha {power.ALPHA:g}")
    print(f"{'repeats':>8} {'level':>8} {'power (sim)':>12} {'power (nct)':>12} "
          f"{'detectable (80 %)':>18} {'stated, plug-in':>16} {'stated, bound':>14}")
    for repeats in range(3, 11):
        level = called(rng, repeats, args.spread, 0.0, args.draws)
        seen = called(rng, repeats, args.spread, args.change, args.draws)
        se = (2 * args.spread ** 2 / repeats) ** 0.5
        computed = power.power_of(args.change, se, repeats - 1, 2 * repeats - 2)
        mde = power.detectable_change(args.spread, repeats, args.spread, repeats)
        plug, bound = stated_power(rng, repeats, args.spread, args.stated)
        print(f"{repeats:>8} {level * 100:>7.2f}% {seen * 100:>11.1f}% {computed * 100:>11.1f}% "
              f"{(mde or 0) * 100:>17.2f}% {plug * 100:>15.1f}% {bound * 100:>13.1f}%")
    need = power.repeats_for(args.spread, args.change)
    print(f"repeats a side to see {args.change * 100:g} % with 80 % power at this spread: "
          f"{need if need is not None else f'more than {power.MOST_REPEATS}'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
