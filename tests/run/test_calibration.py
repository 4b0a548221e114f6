"""[run] calibrate end to end with real frameworks: the peak is measured before the cells, kept
apart from them (calibration/ and the manifest), and "% of peak" divides by it."""

from __future__ import annotations

import csv
import json

import pytest

from tests.matrices import matrix_text

pytestmark = pytest.mark.slow

SMOKE_IS_TINY = {"profiles": {"smoke": {"size": "tiny"}}}
MATRIX = matrix_text("calibrated", min_time=0.2, calibrate=True, profile="smoke",
                     tables=SMOKE_IS_TINY, environments=["numpy", "torch"],
                     benchmarks=[{"workload": "matmul", "environments": ["numpy", "torch"]}])


def test_the_peak_is_measured_apart_and_divides_the_cells(write_matrix, run_cli, results_dir):
    code, out, _ = run_cli(write_matrix(MATRIX, with_environments=False))
    assert code == 0, out
    # One line for the calibrations that went well (a failed one would have its own).
    assert "✓ calibration: 3 peak(s) in 2 environment(s): " in out, out
    run = next(results_dir.glob("calibrated/*"))
    calibrations = [json.loads(p.read_text()) for p in (run / "calibration").glob("*.json")]
    assert {(c["environment"], c["precision"]) for c in calibrations} == {
        ("numpy", "float32"), ("torch", "float32"), ("torch", "bfloat16")}
    for c in calibrations:
        assert c["status"] == "ok" and c["calibration_sizes"] == [128, 256]
        # Two passes: the first picks the size, the second measures it.
        assert [(t["n"], t["pass"]) for t in c["extra"]["calibration"]] == [
            (128, 1), (256, 1), (128, 2), (256, 2)]
        first = [t for t in c["extra"]["calibration"] if t["pass"] == 1]
        assert c["options"]["n"] == c["extra"]["peak"]["n"] == max(
            first, key=lambda t: t["tflops"])["n"]
    cells = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    assert sorted(c["environment"] for c in cells) == ["numpy", "torch"]  # calibrations: none
    peaks = json.loads((run / "manifest.json").read_text())["calibration"]["peaks"]
    chosen = max((c for c in calibrations if c["precision"] == "float32"),
                 key=lambda c: c["extra"]["peak"]["selected_tflops"])
    cpu_peak = next(p for p in peaks if p["kind"] == "float32")
    # Both frameworks: the one picked by its first pass, its second pass's figure.
    assert cpu_peak["tflops"] == pytest.approx(chosen["achieved_tflops"])
    assert cpu_peak["tflops_p10"] <= cpu_peak["tflops"] <= cpu_peak["tflops_p90"]
    (row,) = [r for r in csv.DictReader((run / "summary.csv").read_text().splitlines())
              if r["environment"] == "numpy"]
    assert float(row["fraction_of_peak"]) == pytest.approx(
        float(row["achieved_tflops"]) / cpu_peak["tflops"], rel=1e-6)
    assert "## Measured peak" in (run / "report.md").read_text()


ONLY = matrix_text("only-two", min_time=0.2, calibrate=True, profile="smoke",
                   tables=SMOKE_IS_TINY, environments=["numpy", "torch", "jax"],
                   benchmarks=[{"workload": "matmul", "environments": ["*"]}])


def test_only_two_environments_are_built_and_calibrated(write_matrix, run_cli, results_dir):
    """--only selecting the cells of two environments: exactly those two are prepared and
    calibrated, and the run's first lines say so (the third is never built nor calibrated)."""
    code, out, _ = run_cli(write_matrix(ONLY, with_environments=False),
                           "--only", "*-numpy-*", "--only", "*-torch-*")
    assert code == 0, out
    [line] = [line for line in out.splitlines() if line.startswith("build:")]
    assert line.startswith("build: prepares 2 environment(s): ") and "images/jax" not in line
    assert "images/numpy" in line and "images/torch" in line
    assert line.endswith("not jax (no selected cell runs there)")
    [ready] = [line for line in out.splitlines() if "environments ready: " in line]
    assert "numpy (" in ready and "torch (" in ready and "jax" not in ready
    assert "calibration: 3 peak(s) in 2 environment(s)" in out
    run = next(results_dir.glob("only-two/*"))
    calibrations = [json.loads(p.read_text()) for p in (run / "calibration").glob("*.json")]
    assert {c["environment"] for c in calibrations} == {"numpy", "torch"}
    cells = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    assert {c["environment"] for c in cells} == {"numpy", "torch"}
