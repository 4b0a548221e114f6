"""Effects on synthetic records with known ratios and known noise: the intervals cover the true
ratio at their stated rate, identical cells are not distinguishable, baselines are chosen as
documented, the Keras speedup is one environment effect, and the findings say what the
statistics support."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.results.analysis import effects, findings
from runner.results.analysis.ratios import geometric_mean_ratio, welch_ratio
from runner.results.render import markdown

from tests.results.synthetic import summary_of
from tests.results.rendered import report_of
from runner.results.analysis.report_model import build

DRAWS = 200
summary = summary_of


def _draw(rng, true_ms: float, repeats: int, spread: float) -> list[float]:
    """Repeat medians of one cell: the true time × a log-normal process-to-process factor."""
    return list(true_ms * np.exp(rng.normal(0.0, spread, repeats)))


@pytest.mark.parametrize("repeats, spreads", [(3, (0.03, 0.03)), (3, (0.01, 0.08)),
                                              (5, (0.05, 0.02))])
def test_the_ratio_interval_covers_the_true_ratio_at_its_stated_rate(repeats, spreads):
    rng = np.random.default_rng(7)
    true = 10.0 / 7.0                                   # baseline 10 ms, other 7 ms
    covered = 0
    for _ in range(DRAWS):
        estimate = welch_ratio(_draw(rng, 10.0, repeats, spreads[0]),
                                     _draw(rng, 7.0, repeats, spreads[1]))
        covered += estimate.low <= true <= estimate.high
    # 95 % stated; with 200 draws the binomial standard deviation is 1.5 %.
    assert 0.90 * DRAWS <= covered <= DRAWS, covered


def test_the_geometric_mean_interval_covers_the_true_geometric_mean():
    rng = np.random.default_rng(11)
    rows = [(10.0, 8.0, 0.02), (5.0, 6.0, 0.05), (20.0, 10.0, 0.03), (1.0, 0.9, 0.08)]
    true = math.exp(np.mean([math.log(base / other) for base, other, _ in rows]))
    covered = 0
    for _ in range(DRAWS):
        ratios = [welch_ratio(_draw(rng, base, 3, spread), _draw(rng, other, 3, spread))
                  for base, other, spread in rows]
        overall = geometric_mean_ratio(ratios)
        covered += overall.low <= true <= overall.high
    assert 0.90 * DRAWS <= covered <= DRAWS, covered


def test_a_ratio_of_identical_cells_is_not_distinguishable():
    medians = [10.0, 10.4, 9.7]
    same = welch_ratio(medians, list(medians))
    assert same.ratio == pytest.approx(1.0) and same.low < 1 < same.high
    assert not same.distinguishable and same.p_value == pytest.approx(1.0)
    assert "not distinguishable from noise" in findings.speed_words(same)
    # Cells without any noise at all: the interval is the ratio itself, 1.
    exact = welch_ratio([5.0] * 3, [5.0] * 3)
    assert (exact.ratio, exact.low, exact.high) == (1.0, 1.0, 1.0) and not exact.distinguishable


def test_a_clear_effect_is_distinguishable_and_said_so():
    estimate = welch_ratio([10.0, 10.1, 9.9], [1.25, 1.24, 1.26])
    assert estimate.distinguishable and estimate.low > 7
    words = findings.speed_words(estimate)
    assert words.startswith("8.00× faster (95 % CI ") and "noise" not in words
    slower = welch_ratio([1.25, 1.24, 1.26], [10.0, 10.1, 9.9])
    assert findings.speed_words(slower).startswith("8.00× slower (95 % CI ")


def test_too_few_repeats_give_a_ratio_without_an_interval_and_the_reason():
    estimate = welch_ratio([10.0, 10.2], [5.0, 5.1])
    assert estimate.ratio == pytest.approx(math.sqrt(10.0 * 10.2) / math.sqrt(5.0 * 5.1))
    assert not estimate.has_interval and not estimate.distinguishable
    assert estimate.why == "too few repeats (2 and 2, an interval needs 3 on each side)"
    assert markdown.ratio_text(estimate) == "2.00× (no interval)"
    assert markdown.no_interval_note([estimate]) == [
        "", "With no interval: too few repeats (2 and 2, an interval needs 3 on each side)."]
    assert findings.speed_words(estimate) == "2.00× faster (no interval)"
    overall = geometric_mean_ratio([estimate, welch_ratio([1.0] * 3, [2.0] * 3)])
    assert overall.ratio is not None and not overall.has_interval
    assert overall.why == "1 of 2 rows have none — " + estimate.why
    # Where no row has one, the rows' reason alone: it is said inside "(no interval: …)"
    assert geometric_mean_ratio([estimate, estimate]).why == estimate.why


def test_compare_and_the_effects_share_the_welch_test():
    from scipy.stats import t, ttest_ind

    from runner.results.analysis import comparison as compare

    a, b = [10.0, 10.5, 9.8], [12.0, 12.4, 11.7]
    ratio, p, _ = compare.repeat_test(a, b)
    assert ratio == pytest.approx(welch_ratio(b, a).ratio)
    # Welch's statistic, with min(n_a, n_b) - 1 = 2 degrees of freedom (Hsu).
    statistic = ttest_ind(np.log(b), np.log(a), equal_var=False).statistic
    assert p == pytest.approx(2 * t.sf(abs(statistic), 2))


def run_like() -> list[dict]:
    """jit varies on jax and torch, options.n on numpy: a run's summaries in matrix order."""
    return [summary("jax", [8.0, 8.1, 7.9], jit=False), summary("jax", [1.0, 1.02, 0.98], jit=True),
            summary("torch", [6.0, 6.2, 5.9], api="torch", jit=False),
            summary("torch", [5.0, 5.1, 4.8], api="torch", jit=True),
            summary("numpy", [2.0, 2.1, 1.9], workload="matmul", api="numpy",
                    options={"n": 64}),
            summary("numpy", [16.0, 16.5, 15.9], workload="matmul", api="numpy",
                    options={"n": 128})]


def test_the_layer_a_cell_runs_is_another_row_never_a_setting_effect():
    """options.layer picks the work (its Option says names_the_work): the 28-layer example's
    report read "options.layer = Embedding against Dense: 48.6× faster" and 26 more such
    bullets before this. options.shapes (a setting of the same layer) stays a factor."""
    run = [summary("jax", [m, m, m], workload="layer", options={"layer": layer, "shapes": shapes})
           for layer, m in (("Dense", 4.0), ("Embedding", 0.1)) for shapes in ("tiny", "small")]
    assert {t.factor for t in effects.analyse(run).axes} == {"options.shapes"}


def test_axis_effects_against_the_first_value_in_the_matrix():
    analysis = effects.analyse(run_like())
    by_factor = {t.factor: t for t in analysis.axes}
    assert set(by_factor) == {"jit", "options.n"}
    jit = by_factor["jit"]
    assert jit.baseline is False and jit.values == [True]
    assert [(e.environment, e.label) for e in jit.effects] == [
        ("jax", "elementwise (run) [n=1024]"), ("torch", "elementwise (run) [n=1024]")]
    jax_effect = jit.effects[0].estimate
    assert jax_effect.ratio == pytest.approx(8.0, rel=0.01) and jax_effect.distinguishable
    n = by_factor["options.n"]
    assert n.baseline == 64 and n.values == [128]
    assert n.effects[0].estimate.ratio == pytest.approx(2.0 / 16.1, rel=0.02)
    overall, rows = jit.overall(True)
    assert rows == 2 and overall.ratio == pytest.approx(math.sqrt(8.0 * 6.03 / 4.97), rel=0.02)


def test_configured_baselines_win_and_a_missing_one_is_counted():
    settings = effects.Settings(baselines={"jit": True, "options.n": 512})
    analysis = effects.analyse(run_like(), settings)
    jit = next(t for t in analysis.axes if t.factor == "jit")
    assert jit.baseline is True and jit.values == [False]
    assert jit.effects[0].estimate.ratio == pytest.approx(1 / 8.0, rel=0.01)
    n = next(t for t in analysis.axes if t.factor == "options.n")
    assert n.effects == [] and n.without_baseline == 1
    text = "\n".join(markdown.effects_section(analysis, None))
    assert "1 group(s) have no cell at options.n = 512" in text


def test_settings_come_from_the_manifest():
    settings = effects.Settings.from_manifest({
        "report": {"baselines": {"jit": False, "options": {"n": 64}},
                   "baseline_environment": "torch"},
        "environments": {"numpy": {}, "torch": {}}})
    assert settings.baselines == {"jit": False, "options.n": 64}
    assert settings.baseline_environment == "torch" and settings.environments == ("numpy", "torch")


def test_environment_effects_row_by_row_and_overall():
    cells = [summary("numpy", [10.0, 10.2, 9.9]), summary("jax", [5.0, 5.1, 4.9]),
             summary("numpy", [4.0, 4.1, 3.9], workload="matmul"),
             summary("jax", [1.0, 1.01, 0.99], workload="matmul")]
    table = effects.environment_table(cells, effects.Settings())
    assert table.baseline == "numpy" and table.values == ["jax"]
    assert [round(e.estimate.ratio, 1) for e in table.effects] == [2.0, 4.0]
    overall, rows = table.overall("jax")
    assert rows == 2 and overall.ratio == pytest.approx(math.sqrt(2.0 * 4.0), rel=0.02)
    against_jax = effects.environment_table(cells, effects.Settings(baseline_environment="jax"))
    assert against_jax.baseline == "jax" and against_jax.effects[0].estimate.ratio < 1


def test_the_keras_speedup_is_the_environment_effect_of_keras2_against_the_best_keras3():
    cells = [summary("keras2", [12.0, 12.2, 11.9], api="tf-keras", workload="bert"),
             summary("keras-jax", [6.0, 6.1, 5.9], api="keras", backend="jax", workload="bert"),
             summary("keras-torch", [9.0, 9.1, 8.9], api="keras", backend="torch",
                     workload="bert")]
    entry = effects.keras_speedups(cells)[("bert (run) [n=1024]", 1)]
    assert entry["best_env"] == "keras-jax"
    table = effects.environment_table(cells, effects.Settings(baseline_environment="keras2"))
    jax_effect = next(e for e in table.effects if e.environment == "keras-jax")
    assert entry["estimate"] == jax_effect.estimate and entry["speedup"] == pytest.approx(2.0,
                                                                                        rel=0.01)
    # A Keras 3 cell with a different answer is never the best.
    cells[1]["answer_differs"] = True
    assert effects.keras_speedups(cells)[("bert (run) [n=1024]", 1)]["best_env"] == "keras-torch"


def test_findings_name_the_number_the_interval_and_the_noise():
    # Batch 2 takes twice as long per step: the same time per item.
    cells = run_like() + [summary("numpy", [4.0, 4.1, 3.96], workload="matmul", api="numpy",
                                  options={"n": 64}, batch_size=2)]
    analysis = effects.analyse(cells)
    said = findings.of(cells, analysis).sentences
    jit_jax = next(s for s in said if s.startswith("jit = true against false") and "jax" in s)
    assert jit_jax.startswith("jit = true against false: 8.00× faster (95 % CI ")
    assert jit_jax.endswith("for elementwise (run) [n=1024], batch 1 on jax.")
    batch = next(s for s in said if s.startswith("batch_size = 2 against 1 (per item)"))
    assert "not distinguishable from noise" in batch
    assert any(s.startswith("**jax** is fastest in ") for s in said)


def test_the_forest_plot_is_drawn_and_placed_with_the_effects(tmp_path):
    from runner.results.render import plots

    cells = run_like()
    analysis = effects.analyse(cells)
    drawn = plots.write_plots(tmp_path, build({}, cells, analysis))
    assert drawn[0].title == "Effects (forest plot)" and drawn[0].path == "plots/effects.png"
    assert (tmp_path / "plots" / "effects.png").read_bytes()[:4] == b"\x89PNG"
    text = report_of({"name": "t"}, cells, drawn, analysis)
    head = text.split("## Effects")[1].split("\n## ")[0]
    assert "![Effects (forest plot)](plots/effects.png)" in head
    assert "### jit: against jit = false" in head and "| **Geometric mean** |" in head
    assert text.index("## Findings") < text.index("## Time per step")
    assert "effects.png" not in text.split("## Plots")[1]      # drawn once, with the effects


def test_the_batch_size_effect_is_on_the_time_per_item():
    cells = [summary("numpy", [2.0, 2.02, 1.98], batch_size=1),
             summary("numpy", [3.0, 3.03, 2.97], batch_size=4)]     # 1.5× the step, 4× the items
    (table,) = effects.analyse(cells).axes
    assert table.title == "batch_size: against batch_size = 1 (time per item)"
    estimate = table.effects[0].estimate
    assert estimate.ratio == pytest.approx(4 / 1.5, rel=1e-3) and estimate.distinguishable
    per_step = welch_ratio([2.0, 2.02, 1.98], [3.0, 3.03, 2.97])
    assert (estimate.low, estimate.high) == pytest.approx((per_step.low * 4, per_step.high * 4))
    # Twice the step for twice the items: the same time per item, p ≈ 1.
    same = welch_ratio([2.0, 2.02, 1.98], [4.0, 4.04, 3.96]).scaled(2.0)
    assert same.ratio == pytest.approx(1.0) and same.p_value > 0.9 and not same.distinguishable


def test_the_range_of_an_overall_effect_says_faster_or_slower_never_a_bare_fraction():
    # jax against numpy: 4× faster on one row, 2× slower on another, about the same on the rest.
    times = {"w0": (4.0, 1.0), "w1": (1.0, 2.0), "w2": (2.0, 2.0), "w3": (3.0, 3.0)}
    cells = []
    for workload, (numpy_ms, jax_ms) in times.items():
        cells += [summary("numpy", [numpy_ms, numpy_ms * 1.01, numpy_ms * 0.99], workload=workload),
                  summary("jax", [jax_ms, jax_ms * 1.01, jax_ms * 0.99], workload=workload)]
    table = effects.environment_table(cells, effects.Settings(baseline_environment="numpy"))
    (sentence,) = findings.table_sentences(table)
    assert sentence.startswith("jax against numpy: ") and "geometric mean over 4 rows" in sentence
    assert "; from 2.00× slower (w1 (run) [n=1024], batch 1) to 4.00× faster (w0 (run)" in sentence
    assert "0.500×" not in sentence


def test_two_stacks_of_one_framework_get_a_stack_effect_of_their_own():
    """Before: `torch` against `torch-2-15` was named only when the user made one of them the
    baseline; every other environment was compared with numpy alone (issue 49 item 8)."""
    cells = [summary(env, medians, api=api) for env, medians, api in (
        ("numpy", [10.0, 10.2, 9.9], "numpy"), ("torch", [5.0, 5.1, 4.9], "torch"),
        ("torch-2-15", [4.0, 4.1, 3.9], "torch"), ("torch-env", [5.0, 5.0, 5.0], "torch"))]
    declared = {"numpy": {"image": "numpy", "api": "numpy"},
                "torch": {"image": "torch", "api": "torch"},
                "torch-2-15": {"image": "torch", "api": "torch", "pins": ["torch==2.15.0"]},
                # the same stack with other variables: not a stack effect
                "torch-env": {"image": "torch", "api": "torch", "env": {"OMP_NUM_THREADS": "1"}}}
    stacks = {"torch": {"torch": "2.13.0", "numpy": "2.4.6"},
              "torch-2-15": {"torch": "2.15.0", "numpy": "2.4.6"}}
    settings = effects.Settings.from_manifest({"environments": declared}, stacks)
    analysis = effects.analyse(cells, settings)
    assert analysis.environments.baseline == "numpy"
    (table,) = analysis.stacks
    assert table.factor == effects.STACK and table.baseline == "torch"
    assert table.values == ["torch-2-15"] and table.title == "Stack: torch-2-15 against torch"
    assert table.effects[0].estimate.ratio == pytest.approx(5.0 / 4.0, rel=0.02)
    assert table.changes == {"torch-2-15": "torch 2.13.0 → 2.15.0"}
    said = findings.of(cells, analysis).sentences
    assert any(s.startswith("torch-2-15 (torch 2.13.0 → 2.15.0) against torch: 1.25× faster")
               for s in said), said
    text = "\n".join(markdown.effects_section(analysis, None))
    assert "### Stack: torch-2-15 against torch" in text
    assert "- torch-2-15: torch 2.13.0 → 2.15.0" in text
    # Made the baseline, torch's pair is in the environment table and not repeated.
    own = effects.analyse(cells, effects.Settings.from_manifest(
        {"environments": declared, "report": {"baseline_environment": "torch"}}, stacks))
    assert own.stacks == [] and "torch-2-15" in own.environments.changes
