"""The tuned tier's ranking finding (docs/tuned.md): a row whose fastest environment changes with
tuning is a finding only where a lead is beyond noise at one tier at least. On examples/tuned.toml
here (2026-11-28, three repeats on a 2-core VM) all three changes it stated had both leads'
intervals across 1 (e.g. "tuned, torch is 1.14× faster (95 % CI 0.628–2.08) than keras-torch ...;
at defaults it was 1.06× slower (95 % CI 0.498–2.25)"): two runs could name either winner."""

from __future__ import annotations

import statistics

from runner.results.analysis.ratios import Ratio
from runner.results.analysis.tiers import GAIN, TierPair, ranking_changes
from runner.results.render.markdown_tiers import tiers_section


def cell(environment: str, medians: list[float]) -> dict:
    return {"status": "ok", "environment": environment, "api": "torch", "workload": "cnn",
            "repeat_medians_ms": medians, "geomean_ms": statistics.geometric_mean(medians)}


def pair(environment: str, defaults: list[float], tuned: list[float]) -> TierPair:
    return TierPair(("cnn (fit)", 64), environment, cell(environment, defaults),
                    cell(environment, tuned), Ratio(1.0), GAIN)


def test_a_change_of_winner_beyond_noise_is_said_with_both_leads():
    said = ranking_changes([pair("a", [10.0, 10.1, 9.9], [10.0, 10.1, 9.9]),
                            pair("b", [12.0, 12.1, 11.9], [5.0, 5.1, 4.9])])
    (sentence,) = said
    assert sentence.startswith("tuned, b is 2.00× faster (95 % CI 1.89–2.11)") and sentence.endswith(
        ") than a for cnn (fit), batch 64; at defaults it was 1.20× slower (95 % CI 1.16–1.24).")


def test_a_change_of_winner_within_noise_at_both_tiers_is_counted_not_said():
    noisy = [pair("a", [10.0, 14.0, 7.0], [10.0, 14.0, 7.0]),
             pair("b", [11.0, 15.0, 8.0], [9.0, 13.0, 6.5])]
    assert ranking_changes(noisy) == [
        "In 1 row the fastest environment changes with tuning, within noise at both tiers "
        "(not a finding)."]


def test_a_lead_within_noise_beside_one_beyond_it_is_marked():
    said = ranking_changes([pair("a", [10.0, 10.1, 9.9], [10.0, 14.0, 7.0]),
                            pair("b", [12.0, 12.1, 11.9], [9.0, 13.0, 6.5])])
    (sentence,) = said
    assert sentence.startswith("tuned, b is 1.09× faster (95 % CI 0.322–3.68, within noise) "
                               "than a") and sentence.endswith("slower (95 % CI 1.16–1.24).")


def test_the_section_says_where_every_probe_is_listed():
    tuned = pair("b", [12.0, 12.1, 11.9], [5.0, 5.1, 4.9])
    tuned.tuning.update(source="/r/tuned/tuning/20261128T182421Z", status="tuned", probes=5,
                        minutes=1.2, budget_minutes=3.0, knobs={"compile": "default"})
    lines = tiers_section([tuned])
    assert lines[-2] == ("Every probe (its knobs, its status or why it was pruned, ms/step, "
                         "compile time, peak memory, the answer check) is listed in its "
                         "tuning's folder: `/r/tuned/tuning/20261128T182421Z/tuning/<cell id>/"
                         "probes.jsonl`.")
