"""Statistics on known inputs and on the recorded fixture runs (tests/fixtures/runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.results import stats, summaries as summarize
from runner.results.store import Store

FIXTURES = Path(__file__).parents[1] / "fixtures" / "runs"


def test_summarize_known_answers():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s["median_ms"] == 3.0 and s["mean_ms"] == 3.0
    assert s["min_ms"] == 1.0 and s["max_ms"] == 5.0
    assert s["stdev_ms"] == pytest.approx(1.5811388, rel=1e-6)
    assert s["p10_ms"] == pytest.approx(1.4) and s["p90_ms"] == pytest.approx(4.6)


def test_empty_samples_are_unknown_not_zero():
    assert set(stats.summarize([]).values()) == {None}
    assert stats.iqr([]) is None and stats.cv([1.0]) is None
    assert stats.median_ci([]) == (None, None)


def test_iqr_and_cv():
    samples = [float(v) for v in range(1, 21)]          # 1..20
    assert stats.iqr(samples) == pytest.approx(15.25 - 5.75)
    assert stats.cv([9.0, 10.0, 11.0]) == pytest.approx(0.1)


def test_median_ci_is_the_binomial_order_statistic_interval():
    # n = 20: the 95 % distribution-free interval of the median runs from the 6th to the 15th
    # order statistic (P(6 <= Binomial(20, 1/2) <= 14) = 0.9586 ≥ 0.95; from 7th..14th it is 0.885).
    samples = [float(v) for v in range(1, 21)]
    assert stats.median_ci(samples) == (6.0, 15.0)
    # the interval only depends on ranks: order does not matter
    assert stats.median_ci(samples[::-1]) == (6.0, 15.0)


def test_median_ci_needs_six_samples_at_95_percent():
    assert stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == (None, None)
    assert stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (1.0, 6.0)


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
    return {"status": "ok", "samples_ms": samples, "median_ms": stats.summarize(samples)["median_ms"],
            "train_s": 2.0, "gpu_clock_events": [], **extra}


def test_warnings_for_each_condition():
    steady = [100.0 + (i % 3) for i in range(30)]
    assert stats.pooled([_ok(steady)])["warnings"] == []
    noisy = [100.0, 150.0] * 10
    assert any(w.startswith("CV ") for w in stats.pooled([_ok(noisy)])["warnings"])
    short = stats.pooled([_ok(steady, train_s=0.4)])["warnings"]
    assert short == ["timed window 0.40 s < 1 s"]
    energy = stats.pooled([_ok(steady, gpu_energy_j=50.0, extra={"telemetry_window_s": 0.5})])
    assert any(w.startswith("energy window 0.50 s") for w in energy["warnings"])
    throttled = stats.pooled([_ok(steady, gpu_clock_events=["sync_boost", "sw_power_cap"])])
    assert throttled["warnings"] == ["GPU clock slowdown: sw_power_cap"]
    # sync_boost alone is not a slowdown
    assert stats.pooled([_ok(steady, gpu_clock_events=["sync_boost"])])["warnings"] == []
    split = stats.pooled([_ok(steady), _ok([v * 1.3 for v in steady])])
    assert any(w.startswith("repeats disagree") for w in split["warnings"])
    resumed = stats.pooled([_ok(steady, metadata={"driver_version": "550.54"}),
                            _ok(steady, metadata={"driver_version": "560.35"})])
    assert resumed["warnings"] == ["repeats ran on different setups (driver_version differ)"]


def test_failed_repeats_are_not_pooled():
    out = stats.pooled([_ok([1.0] * 10), {"status": "failed", "samples_ms": [99.0]}])
    assert out["repeats"] == 2 and out["repeats_ok"] == 1 and out["samples"] == 10
    assert out["median_ms"] == 1.0


def test_fixture_run_summaries():
    store = Store(FIXTURES / "base")
    manifest = store.read_manifest()
    by_id = {s["cell_id"]: s for s in summarize.cell_summaries(
        store.records(), [c["id"] for c in manifest["cells"]])}
    cnn = by_id["f2cnnkrjax"]
    assert cnn["repeats_ok"] == 3 and cnn["samples"] == 60
    assert cnn["median_ci_low_ms"] < cnn["median_ms"] < cnn["median_ci_high_ms"]
    assert cnn["median_ms"] == pytest.approx(55.0, rel=0.01)
    assert cnn["warnings"] == [] and cnn["cv"] < stats.CV_LIMIT
    assert cnn["epoch_s"] == 7.5
    assert by_id["m1mmjax000"]["warnings"] == ["GPU clock slowdown: hw_thermal_slowdown"]
    noisy = by_id["m2mmkrjax0"]["warnings"]
    assert [w.split()[0] for w in noisy] == ["CV", "timed", "energy"]
    assert any(w.startswith("repeats disagree") for w in by_id["e1ewjax000"]["warnings"])
    assert by_id["m3mmkrtf00"]["status"] == "failed" and by_id["m3mmkrtf00"]["warnings"] == []


def test_fraction_of_peak_divides_by_the_calibration_never_by_the_cells():
    def cell(workload, precision, tflops, device="A100", kind=None, status="ok"):
        return {"workload": workload, "precision": precision, "achieved_tflops": tflops,
                "device_name": device, "status": status,
                "peak_kind": kind or stats.PEAK_PRECISION.get(precision)}

    peaks = [{"device": "A100", "kind": "float32", "tflops": 19.5},
             {"device": "A100", "kind": "tf32", "tflops": 150.0},
             {"device": "A100", "kind": "bfloat16", "tflops": 300.0}]
    summaries = [cell("matmul", "float32", 15.0), cell("matmul", "float32", 18.0),
                 cell("matmul", "float32", 120.0, kind="tf32"), cell("matmul", "bfloat16", 250.0),
                 cell("cnn", "mixed_bfloat16", 60.0), cell("cnn", "mixed_float16", 50.0),
                 cell("cnn", "float32", 9.0, device="AMD EPYC")]
    stats.add_fraction_of_peak(summaries, peaks)
    assert [s["fraction_of_peak"] for s in summaries] == [
        pytest.approx(15 / 19.5), pytest.approx(18 / 19.5), pytest.approx(0.8),
        pytest.approx(250 / 300), pytest.approx(0.2), None, None]
    assert summaries[1]["fraction_of_peak"] < 1      # the fastest cell is not 100 % of itself
    stats.add_fraction_of_peak(summaries)            # no calibration: no fraction at all
    assert all(s["fraction_of_peak"] is None and s["peak_tflops"] is None for s in summaries)


def test_peaks_come_from_the_fastest_calibration_per_device_and_kind():
    def calibration(env, precision, tflops, tf32=None, device="cuda:0"):
        return {"status": "ok", "environment": env, "precision": precision,
                "achieved_tflops": tflops, "options": {"n": 8192},
                "effective": {"device": device, "tf32": tf32},
                "metadata": {"gpu_name": "H100", "cpu_model": "EPYC"}, "extra": {}}

    peaks = stats.peaks_from([calibration("torch", "float32", 52.0, tf32=False),
                              calibration("jax", "float32", 372.0, tf32=True),
                              calibration("keras-jax", "float32", 360.0, tf32=True),
                              calibration("torch", "bfloat16", 764.0),
                              calibration("numpy", "float32", 0.3, device="cpu"),
                              {**calibration("jax", "bfloat16", 1e9), "status": "failed"}])
    table = {(p["device"], p["kind"]): (p["tflops"], p["environment"]) for p in peaks}
    assert table == {("H100", "float32"): (52.0, "torch"), ("H100", "tf32"): (372.0, "jax"),
                     ("H100", "bfloat16"): (764.0, "torch"), ("EPYC", "float32"): (0.3, "numpy")}


def test_device_name_follows_where_the_cell_computed():
    meta = {"gpu_name": "A100", "cpu_model": "EPYC"}
    assert stats.device_name({"metadata": meta, "effective": {"device": "cuda:0"}}) == "A100"
    assert stats.device_name({"metadata": meta, "effective": {"device": "/CPU:0"}}) == "EPYC"
    assert stats.device_name({"metadata": {"cpu_model": "EPYC"}, "effective": {}}) == "EPYC"
