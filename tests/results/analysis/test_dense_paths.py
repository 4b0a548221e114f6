"""TF32 decided from the paths a workload's FLOPs run on, and % of peak only for dense work
(issue 37 items 2 and 3), on records shaped as an A100's workers write them."""

from __future__ import annotations

import pytest

from runner.results.analysis import answers, summaries as summarize
from tests.results.rendered import report_of

A100 = {"gpu_name": "NVIDIA A100-SXM4-40GB", "cpu_model": "EPYC"}
# What each framework's defaults record on an A100 (tf32.decide): torch allows TF32 for cuDNN
# convolutions, not for matmuls; JAX for both; effective.tf32 is the matmul path.
TORCH = {"device": "cuda:0", "tf32": False,
         "tf32_detail": {"matmul": False, "conv": True, "compute_capability": "8.0"}}
JAX = {"device": "cuda:0", "tf32": True,
       "tf32_detail": {"matmul": True, "conv": True, "compute_capability": "8.0"}}


def record(cell_id: str, environment: str, workload: str, effective: dict, ms: float,
           answer: dict | None = None, repeat: int = 1, **fields) -> dict:
    return {"cell_id": cell_id, "cell_name": cell_id, "environment": environment,
            "api": environment, "backend": None, "image": environment, "workload": workload,
            "task": "fit" if workload == "cnn" else "run", "batch_size": 128 if workload == "cnn" else 1,
            **summarize.AXIS_DEFAULTS, "options": {}, "repeat": repeat, "status": "ok",
            "samples_ms": [ms] * 5, "items_per_step": 1, "flops_per_step": 1e9,
            "metadata": A100, "extra": {}, "effective": effective, "answer": answer, **fields}


def test_a_torch_cnn_runs_its_convolutions_on_tf32():
    """Before: torch and keras-torch CNN cells read TF32 "off" from the matmul flag alone, though
    ~97 % of their FLOPs (the convolutions) run TF32 by default; two of them whose answers
    differ by 0.4 % were then held to float32's 1e-3 and marked as different answers."""
    cells = summarize.cell_summaries([
        record("torch", "torch", "cnn", TORCH, 3.2, {"initial_loss": 2.3000}),
        record("keras-torch", "keras-torch", "cnn", TORCH, 8.8, {"initial_loss": 2.3092})])
    for cell in cells:
        assert cell["tf32_effective"] is True
        assert cell["tf32_paths"] == {"conv": True, "matmul": False}
        assert answers.arithmetic(cell) == "tf32" and cell["peak_kind"] == "tf32"
    cells = answers.checked(cells)
    assert [c["answer_check"] for c in cells] == ["same", "same"]


def test_a_row_whose_paths_differ_is_marked():
    """torch's float32 matmuls against JAX's TF32 ones: the CNN row compares other arithmetic
    on its dense layers, the matmul row on everything."""
    cells = summarize.cell_summaries([
        record("cnn-torch", "torch", "cnn", TORCH, 3.2), record("cnn-jax", "jax", "cnn", JAX, 1.3),
        record("mm-torch", "torch", "matmul", TORCH, 21.3),
        record("mm-jax", "jax", "matmul", JAX, 2.96)])
    assert summarize.tf32_rows(cells) == {("cnn (fit)", 128), ("matmul (run)", 1)}


def test_elementwise_work_has_no_tf32_and_no_percent_of_peak():
    """Before: the same SELU throughput read 0.125 % for JAX (against the TF32 peak) and 1.0 %
    for torch (against the float32 one), and the row was marked for TF32, which it never
    uses."""
    peaks = [{"device": A100["gpu_name"], "kind": "tf32", "tflops": 150.0},
             {"device": A100["gpu_name"], "kind": "float32", "tflops": 19.0}]
    cells = summarize.cell_summaries(
        [record("ew-jax", "jax", "elementwise", JAX, 0.56, flops_per_step=1.7e8),
         record("ew-torch", "torch", "elementwise", TORCH, 0.56, flops_per_step=1.7e8),
         record("mm-jax", "jax", "matmul", JAX, 2.96, flops_per_step=1.1e12)], peaks=peaks)
    by_id = {c["cell_id"]: c for c in cells}
    for cell_id in ("ew-jax", "ew-torch"):
        cell = by_id[cell_id]
        assert cell["peak_kind"] is None and cell["fraction_of_peak"] is None
        assert cell["tf32_effective"] is False and cell["achieved_tflops"] > 0
    assert summarize.tf32_rows(cells) == set()
    assert by_id["mm-jax"]["fraction_of_peak"] == pytest.approx(1.1e12 / 2.96e-3 / 1e12 / 150)
    text = report_of({"name": "t"}, cells)
    assert "| elementwise (run) |" in text and "| elementwise (run) †" not in text


def test_above_one_hundred_percent_of_peak_is_flagged_and_explained():
    """Before: a CPU matmul cell printed "175 %" of the run's peak without a word (issue 49
    item 7); the peak was a floor measured elsewhere, not the device's ceiling."""
    cpu = {"cpu_model": "EPYC"}
    cells = summarize.cell_summaries(
        [record("mm-torch", "torch", "matmul", {"device": "cpu"}, 1.0, metadata=cpu),
         record("mm-numpy", "numpy", "matmul", {"device": "cpu"}, 4.0, metadata=cpu)],
        peaks=[{"device": "EPYC", "kind": "float32", "tflops": 1 / 1.75, "environment": "numpy",
                "n": 256}])
    torch, numpy = sorted(cells, key=lambda c: c["environment"], reverse=True)
    assert torch["fraction_of_peak"] == pytest.approx(1.75)
    assert numpy["fraction_of_peak"] < 1 and numpy["peak_note"] is None
    assert torch["peak_note"].startswith("‼ mm-torch: 175 % of the measured float32 peak "
                                         "(0.571 TFLOP/s, measured in `numpy` at n = 256, "
                                         "another environment, slower there")
    text = report_of({"name": "t"}, cells)
    cells_part = text.split("## Cells")[1].split("\n## ")[0]
    assert "| 175 % ‼ |" in cells_part and torch["peak_note"] in cells_part
