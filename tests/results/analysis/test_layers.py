"""The layer family's report (analysis/layers.py, render/markdown_layers.py): the Layers table's
rows, the Keras tax paired by the API records (Keras on an engine over that engine's native
API), its interval, its order, its finding, and the section's Markdown — on planted summaries
whose ratios are known."""

from __future__ import annotations

import math

import pytest

from runner.results.analysis import layers
from runner.results.render.markdown_layers import layers_section

ENVIRONMENTS = {          # environment → (api, backend)
    "keras-torch": ("keras", "torch"), "keras-jax": ("keras", "jax"),
    "keras2": ("tf-keras", None), "torch": ("torch", None), "jax": ("jax", None),
    "tensorflow": ("tensorflow", None),
}


def cell(environment: str, layer: str, ms: float, task: str = "forward", spread: float = 0.01,
         status: str = "ok", **more) -> dict:
    api, backend = ENVIRONMENTS[environment]
    medians = [ms * (1 - spread), ms, ms * (1 + spread)]
    return {"cell_id": f"{layer}-{task}-{environment}", "cell_name": f"{layer}-{environment}",
            "environment": environment, "api": api, "backend": backend, "workload": "layer",
            "task": task, "batch_size": 16, "precision": "float32", "jit": "auto",
            "size": "full", "tf32": None, "steps_per_execution": 1, "data": "device",
            "device": "auto", "devices": 1, "scaling": "weak", "tier": "defaults",
            "options": {"layer": layer, "shapes": "small"}, "label": f"layer ({task}) {layer}",
            "status": status, "geomean_ms": math.exp(sum(map(math.log, medians)) / 3),
            "repeat_medians_ms": medians, "rss_peak_mb": 500.0, "vram_peak_mb": None, **more}


def test_a_keras_cell_pairs_with_the_native_cell_of_its_engine_only():
    summaries = [cell("keras-torch", "Dense", 6.0), cell("torch", "Dense", 2.0),
                 cell("keras-jax", "Dense", 3.0), cell("jax", "Dense", 1.0),
                 cell("keras2", "Dense", 8.0), cell("tensorflow", "Dense", 4.0)]
    found = layers.layers_of(summaries)
    assert found is not None and len(found.rows) == 1
    pairs = {(t.keras["environment"], t.native["environment"]): t.estimate.ratio
             for t in found.taxes}
    assert pairs == pytest.approx({("keras-torch", "torch"): 3.0, ("keras-jax", "jax"): 3.0,
                                   ("keras2", "tensorflow"): 2.0})
    assert all(t.estimate.has_interval and t.estimate.low > 1 for t in found.taxes)


def test_taxes_are_sorted_largest_first_and_the_largest_is_the_finding():
    summaries = [cell("keras-torch", "Dense", 4.0), cell("torch", "Dense", 2.0),
                 cell("keras-torch", "LSTM", 50.0), cell("torch", "LSTM", 5.0),
                 cell("keras-torch", "ReLU", 1.0), cell("torch", "ReLU", 1.0)]
    found = layers.layers_of(summaries)
    assert [t.row.layer for t in found.taxes] == ["LSTM", "Dense", "ReLU"]
    said = layers.sentences(found)
    assert said[0].startswith("Keras tax: the largest is LSTM forward, small shapes, batch 16: "
                              "keras-torch takes 10.0× the time of torch (95 % CI 9.")
    assert any("geometric mean over 3 layer rows" in s for s in said)


def test_a_different_answer_or_a_missing_cell_is_never_the_finding():
    summaries = [cell("keras-torch", "LSTM", 50.0, answer_differs=True), cell("torch", "LSTM", 5.0),
                 cell("keras-torch", "Dense", 4.0), cell("torch", "Dense", 2.0),
                 cell("keras-torch", "GRU", 9.0), cell("torch", "GRU", 1.0, status="failed")]
    found = layers.layers_of(summaries)
    assert [t.row.layer for t in found.taxes] == ["Dense", "LSTM", "GRU"]
    assert found.taxes[-1].estimate.ratio is None and "failed" in found.taxes[-1].estimate.why
    assert "the largest is Dense" in layers.sentences(found)[0]
    text = "\n".join(layers_section(found))
    assert "≠" in text and "– (torch: failed)" in text


def test_noise_says_so_and_one_repeat_has_no_interval():
    noisy = [cell("keras-torch", "Dense", 2.1, spread=0.3), cell("torch", "Dense", 2.0, spread=0.3)]
    (tax,) = layers.layers_of(noisy).taxes
    assert not tax.estimate.distinguishable
    assert layers.sentences(layers.layers_of(noisy))[0].endswith(
        "— not distinguishable from noise.")
    single = [cell("keras-torch", "Dense", 4.0, repeat_medians_ms=[4.0]),
              cell("torch", "Dense", 2.0, repeat_medians_ms=[2.0])]
    (tax,) = layers.layers_of(single).taxes
    assert tax.estimate.ratio == pytest.approx(2.0) and not tax.estimate.has_interval
    assert "With no interval: too few repeats" in "\n".join(layers_section(layers.layers_of(single)))


def test_the_section_shows_the_table_the_tax_and_memory():
    summaries = [cell("keras-torch", "Dense", 6.0), cell("torch", "Dense", 2.0),
                 cell("keras-torch", "Dense", 9.0, task="train"),
                 cell("torch", "Dense", 3.0, task="train"),
                 cell("keras-torch", "ReLU", 1.0, task="train", status="not_applicable")]
    lines = layers_section(layers.layers_of(summaries))
    text = "\n".join(lines)
    assert lines[0] == "## Layers"
    assert "| Layer | Phase | Shapes | Batch size | keras-torch | torch |" in text
    assert "| Dense | forward | small | 16 | 6.00 | **2.00** |" in text
    assert "| ReLU | train | small | 16 | NA |  |" in text
    assert "| Dense | train | small | 16 | keras-torch | torch | 9.00 | 3.00 | 3.00× (" in text
    assert "### Memory per layer" in text and "Process RSS peak (MB)" in text
    assert layers.layers_of([{**cell("torch", "Dense", 1.0), "workload": "cnn"}]) is None


def test_other_axes_make_rows_of_their_own():
    summaries = [cell("keras-torch", "Dense", 6.0), cell("keras-torch", "Dense", 3.0, jit=True)]
    rows = layers.layers_of(summaries).rows
    assert [r.settings for r in rows] == ["", "jit=True"]
