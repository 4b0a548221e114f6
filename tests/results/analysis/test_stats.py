"""Statistics on known inputs and on the recorded fixture runs (tests/fixtures/runs)."""

from __future__ import annotations


import math

import numpy as np
import pytest

from runner.results.analysis import peaks, stats, summaries as summarize
from runner.results.analysis.ratios import welch_ratio
from runner.results.data.records import summarize as summarize_samples
from runner.results.data.store import Store
from tests.fixtures import FIXTURE_RUNS



def test_summarize_known_answers():
    s = summarize_samples([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s["median_ms"] == 3.0 and s["mean_ms"] == 3.0
    assert s["min_ms"] == 1.0 and s["max_ms"] == 5.0
    assert s["stdev_ms"] == pytest.approx(1.5811388, rel=1e-6)
    assert s["p10_ms"] == pytest.approx(1.4) and s["p90_ms"] == pytest.approx(4.6)


def test_empty_samples_are_unknown_not_zero():
    assert set(summarize_samples([]).values()) == {None}
    assert stats.iqr([]) is None and stats.cv([1.0]) is None
    assert stats.median_ci([]) == (None, None)


def test_iqr_and_cv():
    samples = [float(v) for v in range(1, 21)]          # 1..20
    assert stats.iqr(samples) == pytest.approx(15.25 - 5.75)
    assert stats.cv([9.0, 10.0, 11.0]) == pytest.approx(0.1)


def test_median_ci_from_six_repeats_is_the_binomial_order_statistic_interval():
    # n = 20 repeat medians: the 95 % distribution-free interval of the median runs from the 6th
    # to the 15th order statistic (P(6 <= Binomial(20, 1/2) <= 14) = 0.9586 ≥ 0.95).
    medians = [float(v) for v in range(1, 21)]
    assert stats.median_ci(medians) == (6.0, 15.0)
    assert stats.median_ci(medians[::-1]) == (6.0, 15.0)     # only ranks count
    assert stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (1.0, 6.0)


def test_median_ci_with_three_to_five_repeats_is_a_t_interval_on_the_logs():
    from scipy.stats import t

    medians = [1.0, 1.1, 1.2]
    logs = np.log(medians)
    half = t.ppf(0.975, 2) * logs.std(ddof=1) / np.sqrt(3)
    low, high = stats.median_ci(medians)
    assert (low, high) == pytest.approx((np.exp(logs.mean() - half), np.exp(logs.mean() + half)))
    assert low < np.median(medians) < high


def test_median_ci_needs_three_repeats():
    assert stats.median_ci([1.0, 1.1]) == (None, None)
    assert stats.median_ci([1.0]) == (None, None)
    summary = stats.across_repeats([_ok([1.0] * 50), _ok([1.1] * 50)])
    assert summary["median_ci_low_ms"] is None and summary["median_ci_high_ms"] is None


def _simulated_cell(rng, repeats, samples, process_spread, step_noise, true_median=10.0):
    """One cell's repeats: each process has its own offset (log-normal), its steps share it."""
    return [true_median * np.exp(rng.normal(0.0, process_spread))
            * np.exp(rng.normal(0.0, step_noise, samples)) for _ in range(repeats)]


def _old_pooled_interval(repeats):
    """What the report printed before: the order-statistic interval on every pooled sample."""
    from scipy.stats import quantile_test

    pooled = np.concatenate(repeats)
    interval = quantile_test(pooled, q=float(np.median(pooled)), p=0.5).confidence_interval(0.95)
    return interval.low, interval.high


@pytest.mark.parametrize("repeats, lowest, highest", [(3, 0.92, 0.98), (5, 0.92, 0.98),
                                                     (8, 0.95, 1.0)])
def test_the_interval_across_repeats_covers_the_true_median_at_its_stated_rate(repeats, lowest,
                                                                               highest):
    """2 % spread between processes, 2 % between steps, 100 steps per repeat; the true median
    is 10 ms (log-symmetric noise). The interval across repeats covers it about 95 % of the time
    (the t interval; the order-statistic one, from 6 repeats, is exact and so at least 95 %: with
    8 values it is [min, max], a 99 % interval); the old interval on pooled samples, which treats
    every step as independent, rarely does."""
    rng = np.random.default_rng(19 + repeats)
    trials, covered, covered_old = 400, 0, 0
    for _ in range(trials):
        cell = _simulated_cell(rng, repeats, 100, 0.02, 0.02)
        summary = stats.across_repeats([_ok(list(samples)) for samples in cell])
        covered += summary["median_ci_low_ms"] <= 10.0 <= summary["median_ci_high_ms"]
        low, high = _old_pooled_interval(cell)
        covered_old += low <= 10.0 <= high
    assert lowest <= covered / trials <= highest
    assert covered_old / trials < 0.5


def test_the_headline_follows_the_repeats_not_their_sample_counts():
    """200 samples at 1.00 ms in one repeat, 50 at 1.10 ms in each of two others: two of three
    processes say 1.10, so the cell says 1.10 (pooling every sample said 1.00)."""
    rng = np.random.default_rng(6)
    reps = [_ok(list(1.00 * np.exp(rng.normal(0, 0.005, 200)))),
            _ok(list(1.10 * np.exp(rng.normal(0, 0.005, 50)))),
            _ok(list(1.10 * np.exp(rng.normal(0, 0.005, 50))))]
    summary = stats.across_repeats(reps)
    assert summary["median_ms"] == pytest.approx(1.10, rel=0.01)
    assert summary["samples"] == 300 and summary["repeats_ok"] == 3
    # the spread is the typical repeat's, not the mixture's: p10–p90 stays within ±1 %
    assert summary["p10_ms"] == pytest.approx(1.10, rel=0.01)
    assert summary["p90_ms"] == pytest.approx(1.10, rel=0.015)
    assert summary["cv"] < 0.01 and summary["iqr_ms"] < 0.01
    assert summary["mean_ms"] == pytest.approx((1.00 + 1.10 + 1.10) / 3, rel=0.01)


def test_spread_statistics_weigh_every_repeat_the_same():
    """A steady repeat with many samples and two noisy ones with few: the typical repeat is
    noisy, whatever the counts."""
    steady = [10.0 + 0.001 * (i % 7) for i in range(400)]
    noisy = [10.0 * (1 + 0.2 * ((i % 5) - 2) / 2) for i in range(20)]      # ±20 %
    summary = stats.across_repeats([_ok(steady), _ok(noisy), _ok(noisy)])
    assert summary["cv"] == pytest.approx(stats.cv(noisy))
    assert summary["iqr_ms"] == pytest.approx(stats.iqr(noisy))
    assert summary["p10_ms"] == pytest.approx(summarize_samples(noisy)["p10_ms"])
    assert any(w.startswith("CV ") for w in summary["warnings"])


def test_repeats_disagree_weighs_repeats_equally():
    """One big repeat at 10 ms, two small ones 6 % slower: the two small repeats are the
    majority of processes. Cut to equal sizes, Kruskal-Wallis sees three equal groups."""
    rng = np.random.default_rng(2)
    big = list(10.0 * np.exp(rng.normal(0, 0.01, 2000)))
    small = [list(10.6 * np.exp(rng.normal(0, 0.01, 8))) for _ in range(2)]
    groups = stats.equal_sized([np.asarray(g) for g in [big, *small]])
    assert [len(g) for g in groups] == [8, 8, 8]
    assert set(groups[0]) <= set(big)                 # actual samples, not interpolations
    disagree, p = stats.repeats_disagree([big, *small])
    assert disagree is True and p < stats.REPEAT_ALPHA


def test_repeats_disagree_needs_significance_and_a_practical_spread():
    equal = [[10.0 + 0.01 * i for i in range(20)]] * 3
    assert stats.repeats_disagree(equal)[0] is False
    # shifted by 0.1 % only: significant with this little noise, but too small to matter
    tiny = [[10.0 + 0.001 * i for i in range(20)], [10.01 + 0.001 * i for i in range(20)]]
    disagree, p = stats.repeats_disagree(tiny)
    assert p < stats.REPEAT_ALPHA and disagree is False
    far = [[10.0 + 0.01 * i for i in range(20)], [13.0 + 0.01 * i for i in range(20)]]
    assert stats.repeats_disagree(far)[0] is True
    assert stats.repeats_disagree([[1.0, 1.0], [1.0, 1.0]]) == (False, None)  # all identical
    assert stats.repeats_disagree([[1.0, 2.0]]) == (False, None)             # one repeat


def _ok(samples, **extra):
    return {"status": "ok", "samples_ms": samples,
            "median_ms": summarize_samples(samples)["median_ms"],
            "train_s": 2.0, "gpu_clock_events": [], **extra}


def test_warnings_for_each_condition():
    steady = [100.0 + (i % 3) for i in range(30)]
    assert stats.across_repeats([_ok(steady)])["warnings"] == []
    noisy = [100.0, 150.0] * 10
    assert any(w.startswith("CV ") for w in stats.across_repeats([_ok(noisy)])["warnings"])
    short = stats.across_repeats([_ok(steady, train_s=0.4)])["warnings"]
    assert short == ["timed window 0.400 s < 1 s"]
    energy = stats.across_repeats([_ok(steady, gpu_energy_j=50.0, extra={"telemetry_window_s": 0.5})])
    assert any(w.startswith("energy window 0.500 s") for w in energy["warnings"])
    # Throttling is the machine's condition, not the numbers': conditions.py warns about it.
    throttled = stats.across_repeats([_ok(steady, gpu_clock_events=["sync_boost", "sw_power_cap"])])
    assert throttled["warnings"] == []
    split = stats.across_repeats([_ok(steady), _ok([v * 1.3 for v in steady])])
    assert any(w.startswith("repeats disagree") for w in split["warnings"])
    resumed = stats.across_repeats([_ok(steady, metadata={"driver_version": "550.54"}),
                            _ok(steady, metadata={"driver_version": "560.35"})])
    assert resumed["warnings"] == ["repeats ran on different setups (driver_version differ)"]


def test_failed_repeats_are_not_pooled():
    out = stats.across_repeats([_ok([1.0] * 10), {"status": "failed", "samples_ms": [99.0]}])
    assert out["repeats"] == 2 and out["repeats_ok"] == 1 and out["samples"] == 10
    assert out["median_ms"] == 1.0


def test_fixture_run_summaries():
    store = Store(FIXTURE_RUNS / "base")
    manifest = store.read_manifest()
    by_id = {s["cell_id"]: s for s in summarize.cell_summaries(
        store.records(), [c["id"] for c in manifest["cells"]])}
    cnn = by_id["f2cnnkrjax"]
    assert cnn["repeats_ok"] == 3 and cnn["samples"] == 60
    assert cnn["median_ci_low_ms"] < cnn["median_ms"] < cnn["median_ci_high_ms"]
    assert cnn["median_ms"] == pytest.approx(55.0, rel=0.01)
    assert cnn["warnings"] == [] and cnn["cv"] < stats.CV_LIMIT
    assert cnn["epoch_s"] == 7.5
    assert by_id["m1mmjax000"]["warnings"] == ["GPU clock slowdown: hw_thermal_slowdown in r2"]
    assert by_id["m1mmjax000"]["warning_groups"] == {
        "throttle": ["GPU clock slowdown: hw_thermal_slowdown in r2"]}
    noisy = by_id["m2mmkrjax0"]["warnings"]
    assert [w.split()[0] for w in noisy] == ["CV", "timed", "energy"]
    assert any(w.startswith("repeats disagree") for w in by_id["e1ewjax000"]["warnings"])
    assert by_id["m3mmkrtf00"]["status"] == "failed" and by_id["m3mmkrtf00"]["warnings"] == []


def test_fraction_of_peak_divides_by_the_calibration_never_by_the_cells():
    def cell(workload, precision, tflops, device="A100", kind=None, status="ok"):
        return {"workload": workload, "precision": precision, "achieved_tflops": tflops,
                "device_name": device, "status": status,
                "peak_kind": kind or peaks.PEAK_PRECISION.get(precision)}

    measured = [{"device": "A100", "kind": "float32", "tflops": 19.5},
             {"device": "A100", "kind": "tf32", "tflops": 150.0},
             {"device": "A100", "kind": "bfloat16", "tflops": 300.0}]
    summaries = [cell("matmul", "float32", 15.0), cell("matmul", "float32", 18.0),
                 cell("matmul", "float32", 120.0, kind="tf32"), cell("matmul", "bfloat16", 250.0),
                 cell("cnn", "mixed_bfloat16", 60.0), cell("cnn", "mixed_float16", 50.0),
                 cell("cnn", "float32", 9.0, device="AMD EPYC")]
    peaks.add_fraction_of_peak(summaries, measured)
    assert [s["fraction_of_peak"] for s in summaries] == [
        pytest.approx(15 / 19.5), pytest.approx(18 / 19.5), pytest.approx(0.8),
        pytest.approx(250 / 300), pytest.approx(0.2), None, None]
    assert summaries[1]["fraction_of_peak"] < 1      # the fastest cell is not 100 % of itself
    peaks.add_fraction_of_peak(summaries)            # no calibration: no fraction at all
    assert all(s["fraction_of_peak"] is None and s["peak_tflops"] is None for s in summaries)


def test_peaks_come_from_the_fastest_calibration_per_device_and_kind():
    def calibration(env, precision, tflops, tf32=None, device="cuda:0"):
        return {"status": "ok", "environment": env, "precision": precision,
                "achieved_tflops": tflops, "options": {"n": 8192},
                "effective": {"device": device, "tf32": tf32},
                "metadata": {"gpu_name": "H100", "cpu_model": "EPYC"}, "extra": {}}

    found = peaks.peaks_from([calibration("torch", "float32", 52.0, tf32=False),
                              calibration("jax", "float32", 372.0, tf32=True),
                              calibration("keras-jax", "float32", 360.0, tf32=True),
                              calibration("torch", "bfloat16", 764.0),
                              calibration("numpy", "float32", 0.3, device="cpu"),
                              {**calibration("jax", "bfloat16", 1e9), "status": "failed"}])
    table = {(p["device"], p["kind"]): (p["tflops"], p["environment"]) for p in found}
    assert table == {("H100", "float32"): (52.0, "torch"), ("H100", "tf32"): (372.0, "jax"),
                     ("H100", "bfloat16"): (764.0, "torch"), ("EPYC", "float32"): (0.3, "numpy")}


def test_device_name_follows_where_the_cell_computed():
    meta = {"gpu_name": "A100", "cpu_model": "EPYC"}
    assert peaks.device_name({"metadata": meta, "effective": {"device": "cuda:0"}}) == "A100"
    assert peaks.device_name({"metadata": meta, "effective": {"device": "/CPU:0"}}) == "EPYC"
    assert peaks.device_name({"metadata": {"cpu_model": "EPYC"}, "effective": {}}) == "EPYC"


def test_tf32_unknown_is_never_taken_for_off():
    """A GPU float32 record that does not say whether TF32 was on (JAX before the worker
    recorded it: JAX's default on sm_80+ is TF32) has no peak kind: no float32 peak from it, no
    "% of peak" against one. On a CPU float32 is float32."""
    gpu = {"gpu_name": "H100", "cpu_model": "EPYC"}

    def record(tf32=None, device="cuda:0", precision="float32"):
        effective = {"device": device} | ({} if tf32 is None else {"tf32": tf32})
        return {"status": "ok", "environment": "jax", "precision": precision,
                "achieved_tflops": 372.0, "options": {"n": 8192}, "effective": effective,
                "metadata": gpu, "extra": {}}

    assert peaks.tf32_state(record()) is None
    assert peaks.tf32_state(record(tf32=False)) is False
    assert peaks.tf32_state(record(device="cpu")) is False
    assert peaks.peak_kind("float32", None) is None
    assert peaks.peak_kind("float32", True) == "tf32"
    assert peaks.peak_kind("bfloat16", None) == "bfloat16"
    assert peaks.peaks_from([record()]) == []
    assert [p["kind"] for p in peaks.peaks_from([record(tf32=True)])] == ["tf32"]
    cell = {**record(), "cell_id": "c", "cell_name": "matmul-run-jax-b1", "repeat": 1,
            "api": "jax", "backend": None, "image": "jax", "workload": "matmul", "task": "run",
            "batch_size": 1, "jit": "auto", "size": "full", "tf32": None,
            "steps_per_execution": 1, "data": "device", "device": "auto", "error": None,
            "samples_ms": [3.0] * 5, "items_per_step": 1, "flops_per_step": 2 * 8192.0 ** 3}
    (summary,) = summarize.cell_summaries(
        [cell], ["c"], [{"device": "H100", "kind": "float32", "tflops": 52.0}])
    assert summary["tf32_effective"] is None and summary["peak_kind"] is None
    assert summary["fraction_of_peak"] is None      # not 700 % of torch's float32 peak


# --- the ratio test holds its level at the repeat counts runs use (issue 37 item 6) -------------

def hsu_p_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ratios.welch_ratio's two-sided p for rows of log repeat medians, vectorised: Welch's
    statistic with min(n_a, n_b) - 1 degrees of freedom."""
    from scipy.stats import t

    se = np.sqrt(a.var(axis=1, ddof=1) / a.shape[1] + b.var(axis=1, ddof=1) / b.shape[1])
    return 2 * t.sf(np.abs(a.mean(axis=1) - b.mean(axis=1)) / se, min(a.shape[1], b.shape[1]) - 1)


@pytest.mark.parametrize("n_a, n_b", [(3, 3), (3, 4), (3, 5), (4, 4), (5, 5), (6, 6), (3, 10)])
def test_identical_cells_are_called_different_at_most_as_often_as_stated(n_a, n_b):
    """Identical centres, spreads from equal to 10× apart, 40 000 simulated pairs each: the
    rejection rate at alpha 0.05 stays within 5 % (plus 3 standard errors of the simulation).
    Welch-Satterthwaite's degrees of freedom, used before, rejected 5.8 % at 3 against 3 and
    8.3 % at 2 against 3 (spreads 10× apart, 200 000 pairs)."""
    draws, alpha = 40_000, 0.05
    rng = np.random.default_rng(n_a * 100 + n_b)
    for spread_ratio in (1.0, 3.0, 10.0):
        for wide_side in ("a", "b"):
            sd_a, sd_b = (0.02 * spread_ratio, 0.02) if wide_side == "a" else (0.02, 0.02 * spread_ratio)
            a = rng.normal(0.0, sd_a, (draws, n_a))
            b = rng.normal(0.0, sd_b, (draws, n_b))
            p = hsu_p_values(a, b)
            for i in range(50):              # the simulation's p is the function's own
                ratio = welch_ratio(list(np.exp(a[i])), list(np.exp(b[i])))
                assert ratio.p_value == pytest.approx(p[i], rel=1e-6, abs=1e-12)
            rate = float(np.mean(p < alpha))
            assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / draws), (spread_ratio, rate)


def test_compare_refuses_a_verdict_below_three_repeats_a_side():
    """With 2 repeats on a side no test both holds its level and can see a change (min(n) - 1
    = 1 degree of freedom): compare says so instead of calling it the same."""
    from runner.results.analysis import comparison as compare

    assert compare.MIN_REPEATS == 3


def test_a_block_too_short_for_its_target_is_a_warning_to_act_on():
    """A repeat whose block no longer met its target (the worker's extra.block_short: a frozen
    bad calibration) is a warning its user must act on; before, nothing said so."""
    from runner.results.analysis import conditions
    from tests.results.synthetic import summary_of

    quiet = summary_of("jax", [0.48, 0.5, 0.49])
    assert not any("too short" in w for w in quiet["warnings"])
    records = [{"cell_id": "c", "cell_name": "c", "environment": "jax", "api": "jax",
                "backend": None, "image": "jax", "workload": "matmul", "task": "run",
                "batch_size": 1, **summarize.AXIS_DEFAULTS, "options": {"n": 64},
                "repeat": i + 1, "status": "ok", "samples_ms": [0.48] * 150,
                "calls_per_sample": 1, "metadata": {}, "effective": {},
                "extra": {"block_short": {"median_sample_ms": 0.48, "calls_per_sample": 1,
                                          "target_ms": 10.0}}} for i in range(3)]
    (cell,) = summarize.cell_summaries(records)
    (warning,) = [w for w in cell["warnings"] if "too short" in w]
    assert warning.startswith("block of 1 call(s) too short: median sample 0.480 ms, under a "
                              "quarter of its 10.0 ms target in r1, r2, r3")
    assert conditions.to_act_on(cell)
