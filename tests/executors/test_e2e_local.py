"""End to end through the local executor: one small matrix across NumPy, PyTorch, JAX,
TensorFlow and Keras 3 on its three backends, result files checked field by field."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from runner import cli
from runner.worker.metadata import KEYS
from runner.worker.protocol import RECORD_FIELDS
from tests.matrices import matrix_text

pytestmark = pytest.mark.slow

N = 64
STEPS = 4
MATRIX = matrix_text(
    "e2e", warmup_steps=2, steps=STEPS, timeout=600, preallocate=False,
    environments=["numpy", "torch", "jax", "tensorflow", "keras-tensorflow", "keras-jax",
                  "keras-torch"],
    benchmarks=[{"workload": "matmul", "environments": ["*"], "options": {"n": N}, "batch_size": 2},
                {"workload": "elementwise", "environments": ["jax", "numpy"], "jit": [False, True],
                 "options": {"n": 4096}}])

GPU_FIELDS = ("vram_initial_mb", "vram_peak_mb", "vram_source", "nvml_memory_peak_mb",
              "gpu_util_mean", "gpu_power_mean_w", "gpu_energy_j", "gpu_sm_clock_mhz")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("e2e")
    matrix = folder / "matrix.toml"
    matrix.write_text(MATRIX)
    code = cli.main([str(matrix), "--results-dir", str(folder / "results")])
    (run,) = list((folder / "results" / "e2e").iterdir())
    assert code == 0, "not-applicable cells are not failures; everything else must be ok"
    return run


def records(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run_dir / "cells").glob("*.json"))]


def test_every_cell_has_a_record(run_dir):
    got = {(r["environment"], r["workload"], r["jit"]) for r in records(run_dir)}
    assert len(got) == 7 + 4
    statuses = {(r["environment"], r["workload"], r["jit"]): r["status"] for r in records(run_dir)}
    assert statuses.pop(("numpy", "elementwise", True)) == "not_applicable"
    assert set(statuses.values()) == {"ok"}, statuses


def test_records_carry_every_field_with_correct_values(run_dir):
    for r in records(run_dir):
        assert set(r) == set(RECORD_FIELDS)
        assert r["schema"] == 1
        if r["status"] != "ok":
            continue
        where = f"{r['environment']}/{r['workload']}"
        assert r["run_id"].startswith("e2e/") and r["repeat"] == 1 and r["steps"] == STEPS
        assert r["warmup_steps"] == 2 and len(r["warmup_s"]) == 2
        # A sample is a block of calls_per_sample steps (one device sync per block), stored
        # per step; the fixed step count is met in whole blocks.
        per_sample = r["calls_per_sample"]
        assert per_sample >= 1 and len(r["samples_ms"]) == math.ceil(STEPS / per_sample), where
        assert all(s > 0 for s in r["samples_ms"]), where
        assert r["compile_s"] == r["warmup_s"][0] > 0
        assert math.isclose(r["train_s"] * 1000, sum(r["samples_ms"]) * per_sample, rel_tol=1e-6)
        assert r["min_ms"] <= r["p10_ms"] <= r["median_ms"] <= r["p90_ms"] <= r["max_ms"]
        assert r["stdev_ms"] is not None and r["steps_per_call"] == 1
        assert 0 < r["rss_initial_mb"] <= r["rss_peak_mb"]
        assert r["cpu_util_mean"] > 0
        for field in GPU_FIELDS:
            assert r[field] is None, (where, field)  # no GPU: null, never zero
        assert r["gpu_clock_events"] is None
        assert r["returncode"] == 0 and r["wall_s"] > r["train_s"]
        assert (run_dir / r["log"]).is_file()
        meta = r["metadata"]
        assert set(meta) <= set(KEYS)
        for key in ("python_version", "framework_name", "framework_version", "cpu_model",
                    "cpu_count", "host_name", "lock_sha256", "executor", "env_path"):
            assert meta.get(key), (where, key)
        assert "gpu_name" not in meta and "driver_version" not in meta
        assert r["effective"]["device"].lower().replace("/", "").startswith(("cpu", "tfrt_cpu")), r["effective"]
        if r["workload"] == "matmul":
            assert r["batch_size"] == 2 and r["options"]["n"] == N
            assert r["flops_per_step"] == 2.0 * 2 * N**3
            assert r["items_per_s"] == pytest.approx(2 * 1000 / r["median_ms"])
            assert r["achieved_tflops"] == pytest.approx(r["flops_per_step"] / r["median_ms"] / 1e9)


def test_what_every_record_says_about_its_measurement(run_dir):
    """TF32 (never on a CPU), GC off in the timed window, cold compilation caches, and the
    framework's compilations before and inside the window, on every API."""
    for r in records(run_dir):
        if r["status"] != "ok":
            continue
        where = f"{r['environment']}/{r['workload']}/{r['jit']}"
        effective = r["effective"]
        assert effective["tf32"] is False, where
        assert effective["tf32_detail"]["matmul"] is False is effective["tf32_detail"]["conv"]
        assert effective["gc_in_timed_window"] == "disabled", where
        assert r["compile_cache"] == "fresh", where
        assert r["timing"].startswith("blocks of "), where
        if r["api"] == "numpy":
            assert r["compilations"] is None, where
            continue
        counts = r["compilations"]
        assert counts["counted"] and counts["before_timed"] >= 0, where
        assert counts["timed"] == 0, (where, counts)    # nothing recompiles inside the window
        if r["environment"] == "jax" and r["jit"] is True:
            assert counts["before_timed"] >= 1, counts     # the jitted step itself


def test_framework_metadata_matches_the_environment(run_dir):
    for r in records(run_dir):
        if r["status"] != "ok":
            continue
        meta = r["metadata"]
        if r["api"] == "keras":
            assert meta["framework_name"] == "keras" and meta["keras_backend"] == r["backend"]
            assert meta["keras_version"].startswith("3.")
            assert r["effective"]["dtype_policy"] == "float32"
        else:
            assert meta["framework_name"] == r["api"]


def test_preallocation_setting_reaches_the_allocator(run_dir):
    """[run] preallocate = false turns JAX's and TensorFlow's up-front grab off; the records say so."""
    allocators = {r["environment"]: r["allocator"] for r in records(run_dir)
                  if r["status"] == "ok" and r["workload"] == "matmul"}
    for name in ("jax", "keras-jax"):
        assert allocators[name]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    for name in ("tensorflow", "keras-tensorflow"):
        assert allocators[name]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert "PYTORCH_CUDA_ALLOC_CONF" in allocators["torch"]


def test_jit_axis_reaches_the_framework(run_dir):
    jax_cells = {r["jit"]: r for r in records(run_dir)
                 if r["environment"] == "jax" and r["workload"] == "elementwise"}
    assert jax_cells[True]["effective"]["jit"] == "jax.jit"
    assert jax_cells[False]["effective"]["jit"] == "eager (op-by-op)"


def test_merged_outputs(run_dir):
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 11
    rows = list(csv.DictReader((run_dir / "summary.csv").read_text().splitlines()))
    assert len(rows) == 11 and {r["status"] for r in rows} == {"ok", "not_applicable"}
    report = (run_dir / "report.md").read_text()
    assert "| matmul (run) [n=64] | 2 |" in report and "**" in report
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["profile"] == "full" and manifest["executor"] == "local"
    assert set(manifest["environments"]) == {"numpy", "torch", "jax", "tensorflow",
                                             "keras-tensorflow", "keras-jax", "keras-torch"}
    assert "[run]" in (run_dir / "matrix.toml").read_text()
