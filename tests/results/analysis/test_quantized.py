"""The quantized tier on the host and in the catalog, without a framework: which cells apply and
why not, the error figure, the verdict under each mode's tolerance, the pairing with the float
cell of the row, the precision effects with the error beside them, emulated float8 never timed
against native (docs/quantized.md). The real frameworks: tests/worker/test_quantized.py."""

from __future__ import annotations

import numpy as np
import pytest
from tests.results.synthetic import summary_of

from runner.results.analysis import answers, effects, quantized
from runner.results.render.markdown_parts import effect_table
from runner.results.render.markdown_quantized import quantized_section
from runner.worker import catalog
from runner.worker.apis.quantized import quantization_error
from runner.results.analysis.report_model import quantized_cells, table_view


def reason(workload: str, api: str, precision: str, task: str, backend: str | None = None,
           **axes) -> str | None:
    return catalog.not_applicable_reason(
        workload, api, backend, {**catalog.AXIS_DEFAULTS, "precision": precision, **axes}, task)


def test_the_quantized_values_and_their_float_base():
    assert {"int8", "int8_weight_only", "int4", "float8", "int8_from_bfloat16"} \
        <= set(catalog.PRECISIONS)
    assert catalog.quantized_mode("int8_from_bfloat16") == "int8"
    assert catalog.float_base("int4") == "float32"
    assert catalog.float_base("float8_from_bfloat16") == "bfloat16"
    assert catalog.quantized_mode("bfloat16") is None and catalog.float_base("bfloat16") == "bfloat16"


def test_where_a_quantized_precision_applies_and_why_not():
    for backend in catalog.KERAS_BACKENDS:
        assert reason("bert", "keras", "int8", "predict", backend) is None
        assert reason("gemma", "keras", "float8", "generate", backend) is None
    assert reason("cnn", "torch", "int8", "predict") is None
    assert reason("bert", "hf", "int8_weight_only", "predict") is None
    assert "Keras 2 (tf-keras) has no model.quantize" in reason("bert", "tf-keras", "int8", "predict")
    assert "native JAX has no quantized layers" in reason("cnn", "jax", "int8", "predict")
    assert "TensorFlow Lite" in reason("cnn", "tensorflow", "int8", "predict")
    # Quantized training where Keras has it: QLoRA for the causal LMs, float8 training.
    assert reason("gemma", "keras", "int8", "fit", "jax") is None
    assert reason("cnn", "keras", "float8", "fit", "torch") is None
    assert "take no LoRA" in reason("mistral", "keras", "float8", "fit", "jax")
    assert "frozen" in reason("cnn", "keras", "int8", "fit", "jax")
    assert "torchao" in reason("bert", "hf", "int8", "fit")
    assert "CUDA" in reason("cnn", "torch", "int4", "predict", device="cpu")
    assert reason("cnn", "torch", "int4", "predict", device="gpu") is None
    assert "runs float32/bfloat16" in reason("sam", "keras", "int8", "predict", "jax")
    assert "float32/bfloat16 only" in reason("matmul", "numpy", "int8", "run")


def test_an_unknown_precision_is_one_line_and_exit_2(write_matrix, run_cli):
    path = write_matrix("""
[[benchmarks]]
workload = "cnn"
task = "predict"
batch_size = 8
environments = ["keras-jax"]
precision = "int3"
""")
    code, _, err = run_cli(path, "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "precision" in err and "int8" in err


def test_the_error_figure_of_two_sets_of_logits():
    reference = np.array([[1.0, 2.0, 0.5], [0.2, 0.1, -1.0]])
    shifted = reference + np.array([[0.0, -1.5, 0.0], [0.0, 0.02, 0.0]])
    error = quantization_error(reference, shifted)
    assert error["rows"] == 2 and error["top1_agreement"] == 0.5
    assert error["max_abs_error"] == pytest.approx(1.5)
    assert error["relative_error"] == pytest.approx(0.75)


def quantized_summary(env: str, medians: list[float], precision: str, relative: float,
                      **more) -> dict:
    s = summary_of(env, medians, workload="bert", api="keras", precision=precision,
                   batch_size=8)
    s["quantization"] = {"mode": catalog.quantized_mode(precision), "library": "keras 3.15.1",
                         "built_in": catalog.float_base(precision), "config": "c",
                         "model_bytes_before": 4000, "model_bytes_after": 1000,
                         "error": {"rows": 8, "top1_agreement": 0.875, "max_abs_error": 0.04,
                                   "relative_error": relative}, **more}
    s["emulated"] = str(more.get("float8", "")).startswith("emulated")
    s["answer"] = {"output": {"rms": 1.0 + relative, "mean": 0.1, "max_abs": 2.0}}
    return s


def test_verdicts_pairs_and_the_report_section():
    base = summary_of("keras-jax", [10.0, 11.0, 10.5], workload="bert", api="keras",
                      batch_size=8)
    base["answer"] = {"output": {"rms": 1.0, "mean": 0.1, "max_abs": 2.0}}
    good = quantized_summary("keras-jax", [5.0, 5.2, 5.1], "int8", 0.02)
    bad = quantized_summary("keras-jax", [5.0, 5.2, 5.1], "int8_weight_only", 0.2)
    summaries = base, good, bad = answers.checked([base, good, bad])
    assert good["quantization_check"] == quantized.WITHIN
    assert bad["quantization_check"] == quantized.BEYOND
    assert "top-1 agreement 87.5 % (7 of 8)" in good["quantization_detail"]
    assert "2.00 % of the float32 logits' largest" in good["quantization_detail"]
    assert good["quantization_base"] == base["cell_name"]
    assert "agrees" in good["quantization_base_check"]
    assert "relative difference" in bad["quantization_base_check"]
    assert base["quantization_check"] is None and base["quantization_detail"] == ""
    text = "\n".join(quantized_section(quantized_cells(summaries)))
    assert "## Quantized tier" in text and "4,000 → 1,000 (× 0.250)" in text
    assert "beyond tolerance 5.00 %" in text


def test_precision_effects_show_the_error_and_never_time_emulated_float8():
    base = summary_of("keras-jax", [10.0, 11.0, 10.5], workload="bert", api="keras",
                      batch_size=8)
    int8 = quantized_summary("keras-jax", [5.0, 5.2, 5.1], "int8", 0.02)
    fp8 = quantized_summary("keras-jax", [5.0, 5.2, 5.1], "float8", 0.05,
                            float8="emulated: no float8 matmul on a CPU")
    summaries = answers.checked([base, int8, fp8])
    (table,) = [t for t in effects.analyse(summaries).axes if t.factor == "precision"]
    (int8_effect,) = table.of("int8")
    assert int8_effect.estimate.ratio == pytest.approx(10.5 / 5.1, rel=0.05)
    assert int8_effect.note.startswith("int8: top-1 agreement")
    (fp8_effect,) = table.of("float8")
    assert fp8_effect.estimate.ratio is None and "emulated" in fp8_effect.estimate.why
    text = "\n".join(effect_table(table))
    assert "· int8: top-1 agreement 87.5 %" in text and "float8 emulated" in text


def test_the_keras_table_puts_quantized_cells_in_a_column_group_never_bold():
    from runner.results.analysis.keras_table import keras_view
    from runner.results.render.markdown import markdown_table

    float_cell = summary_of("keras-jax", [10.0, 11.0, 10.5], workload="bert", api="keras",
                            backend="jax", batch_size=8)
    other = summary_of("keras-torch", [20.0, 21.0, 20.5], workload="bert", api="keras",
                       backend="torch", batch_size=8)
    int8 = quantized_summary("keras-jax", [5.0, 5.2, 5.1], "int8", 0.02)
    int8["backend"] = "jax"
    summaries = answers.checked([float_cell, other, int8])
    rows, columns, titles = keras_view(summaries)
    assert columns[-1] == "keras-jax · int8" and titles[columns[-1]] == "Keras 3 (JAX) · int8"
    assert len({s["label"] for s in rows}) == 1          # one row: the int8 cell beside float
    table = markdown_table(table_view(rows, columns, titles), "geomean_ms", keras_columns=True)
    assert "**10.5**" in table and "**5.10**" not in table and "5.10" in table


def test_a_user_workload_receives_any_quantized_precision_on_any_api():
    user = catalog.Workload("mine", ("predict",), True, catalog.PRECISIONS, family="user",
                            origin="bench/mine.py",
                            api_tasks={"jax": {"predict": "step"}, "torch": {"predict": "step"}})
    for api in ("jax", "torch"):
        axes = {**catalog.AXIS_DEFAULTS, "precision": "int4", "device": "cpu"}
        assert catalog.not_applicable_reason(user, api, None, axes, "predict") is None
