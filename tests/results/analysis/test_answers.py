"""The same-answer check on synthetic summaries: tolerances by precision, the majority as the
reference, the marks in every table, and the cells whose check the matrix turned off."""

from __future__ import annotations

import copy

import pytest

from runner.results.analysis import answers, effects, findings
from runner.results.analysis import summaries as summarize
from runner.results.formatting import DIFFERENT_MARK

from tests.results.synthetic import summary_of as summary
from tests.results.rendered import report_of, tables_of


def output(rms: float, mean: float = 0.01, max_abs: float = 4.0) -> dict:
    return {"output": {"rms": rms, "mean": mean, "max_abs": max_abs}}


def row(*values: dict, precision: str = "float32", medians=(3.0, 2.0, 1.0, 4.0)) -> list[dict]:
    cells = []
    for env, answer, ms in zip(("numpy", "torch", "jax", "tensorflow"), values, medians, strict=False):
        cell = summary(env, [ms, ms * 1.01, ms * 0.99], api=env, precision=precision)
        cell["answer"] = answer
        cells.append(cell)
    return cells


@pytest.mark.parametrize("precision, kind, close, far", [
    ("float32", "float32", 1.0005, 1.01),
    ("mixed_float16", "float16", 1.005, 1.05),
    ("bfloat16", "bfloat16", 1.03, 1.2),
    ("mixed_bfloat16", "bfloat16", 1.03, 1.2),
])
def test_the_tolerance_follows_the_precision(precision, kind, close, far):
    assert answers.arithmetic({"precision": precision}) == kind
    assert answers.differences(output(10.0), output(10.0 * close), kind) == ([], 3)
    found, _ = answers.differences(output(10.0), output(10.0 * far), kind)
    assert found and found[0].startswith("output.rms: ")


def test_tf32_and_an_unknown_tf32_state_on_a_gpu_get_the_tf32_tolerance():
    assert answers.arithmetic({"precision": "float32", "tf32_effective": True}) == "tf32"
    assert answers.arithmetic({"precision": "float32", "tf32_effective": None,
                               "on_gpu": True}) == "tf32"
    assert answers.arithmetic({"precision": "float32", "tf32_effective": False}) == "float32"


def test_a_mean_near_zero_is_compared_against_the_outputs_scale():
    # 0.001 against 0.0015 is 50 % of the mean but 5e-5 of the output's rms (10).
    assert answers.differences(output(10.0, mean=0.001), output(10.0, mean=0.0015),
                               "float32") == ([], 3)


def test_lists_losses_and_tokens():
    kind = "float32"
    logits = [0.1, -0.2, 0.05, 0.0]
    assert answers.differences({"initial_logits": logits},
                               {"initial_logits": [v + 1e-5 for v in logits]}, kind)[0] == []
    found, _ = answers.differences({"initial_logits": logits},
                                   {"initial_logits": [0.1, -0.2, 0.05, 0.02]}, kind)
    assert found and "initial_logits" in found[0]
    assert answers.differences({"first_step_loss": 2.3}, {"first_step_loss": 73.6}, kind)[0]
    tokens = {"tokens": [[5, 6, 7, 8, 9], [1, 2, 3, 4, 5]]}
    late = {"tokens": [[5, 6, 7, 8, 1], [1, 2, 3, 4, 5]]}     # differs after 4 tokens
    assert answers.differences(tokens, late, "float32")[0] == []
    early = {"tokens": [[5, 9, 7, 8, 9], [1, 2, 3, 4, 5]]}
    assert answers.differences(tokens, early, "float32")[0]
    assert answers.differences(tokens, early, "bfloat16")[0] == []    # first token only
    assert answers.differences({"x": 1.0}, {"y": 1.0}, kind) == ([], 0)


def test_the_majority_is_the_reference_and_the_odd_cell_is_different():
    cells = row(output(10.0), output(10.0), output(5.0), output(10.0))   # jax is the fastest
    cells = answers.checked(cells)
    assert [c["answer_check"] for c in cells] == ["same", "same", "different", "same"]
    jax = cells[2]
    assert jax["answer_differs"] and jax["answer_reference"] == "numpy"
    assert "output.rms: 5.00 against 10.0" in jax["answer_detail"]


def test_with_no_majority_every_disagreeing_cell_is_marked():
    cells = row(output(10.0), output(5.0))
    cells = answers.checked(cells)
    assert [c["answer_check"] for c in cells] == ["no majority", "no majority"]
    one = row(output(10.0))
    one = answers.checked(one)
    assert one[0]["answer_check"] == "alone" and not one[0]["answer_differs"]


def test_unchecked_and_unrecorded_cells_are_not_compared():
    cells = row(output(10.0), output(5.0), None)
    cells = answers.checked(cells, unchecked={cells[1]["cell_id"]})
    assert [c["answer_check"] for c in cells] == ["alone", "not checked", "not recorded"]
    manifest = {"cells": [{"id": "a"}, {"id": "b", "check_answers": False}]}
    assert answers.unchecked_cells(manifest) == {"b"}


@pytest.mark.parametrize("workload", ["stable_diffusion", "bert"])
def test_keras2_and_keras3_keras_hub_answers_are_never_compared(workload):
    # keras-nlp / keras-cv 0.8 against keras-hub: other libraries, other weights.
    k2 = summary("keras2", [5.0] * 3, api="tf-keras", workload=workload)
    k3 = summary("keras-jax", [4.0] * 3, api="keras", backend="jax", workload=workload)
    k2["answer"], k3["answer"] = output(1.0), output(9.0)
    k2, k3 = answers.checked([k2, k3])
    assert k2["answer_check"] == k3["answer_check"] == "alone"


def test_keras2_and_keras3_cnn_answers_are_compared():
    k2 = summary("keras2", [5.0] * 3, api="tf-keras", workload="cnn")
    k3 = summary("keras-jax", [4.0] * 3, api="keras", backend="jax", workload="cnn")
    k2["answer"], k3["answer"] = output(1.0), output(9.0)
    k2, k3 = answers.checked([k2, k3])
    assert k2["answer_check"] == k3["answer_check"] == "no majority"


def test_the_verdicts_are_a_mapping_of_their_own_and_the_summaries_stay_as_they_are():
    """The history keeps a run's summaries as the statistics made them; the report shows them
    with their verdicts: answers.check reads them and changes nothing, neither the rows' check
    nor the generate cells' work nor the quantized checks."""
    cells = row(output(10.0), output(10.0), output(5.0), None)
    work = {"prompt_positions": 8, "new_tokens_per_sequence": 4, "decode_iterations": 4}
    for cell, iterations in zip((cells[0], cells[1], cells[3]), (4, 4, 2), strict=True):
        cell["generate_work"] = {**work, "decode_iterations": iterations}
    before = copy.deepcopy(cells)
    checks = answers.check(cells)
    assert cells == before
    assert list(checks) == [c["cell_id"] for c in cells]
    assert [checks[c["cell_id"]]["answer_check"] for c in cells] == \
        ["same", "same", "different", "different work"]
    assert checks[cells[3]["cell_id"]]["answer_detail"] == \
        "other work per call: decode iterations 2 against 4"
    assert all(check["quantization_check"] is None for check in checks.values())
    shown = answers.with_checks(cells, checks)
    assert cells == before and not any(a is b for a, b in zip(shown, cells, strict=True))
    assert [s["answer_differs"] for s in shown] == [False, False, True, True]
    assert [{k: v for k, v in s.items() if k not in answers.AnswerCheck.__annotations__}
            for s in shown] == before


def test_a_different_answer_is_marked_in_every_table_and_never_bold():
    cells = row(output(10.0), output(10.0), output(5.0), output(10.0))
    cells = answers.checked(cells)
    analysis = effects.analyse(cells)
    text = report_of({"name": "t"}, cells, None, analysis)
    main = next(line for line in text.splitlines() if line.startswith("| elementwise (run) ["))
    # jax (1.0 ms) would be best; it computed a different answer: marked, and torch (2.0) is bold
    assert f"| 1.00 {DIFFERENT_MARK} |" in main and "**2.00**" in main
    assert answers.NOTE in text
    section = text.split("## Different answers")[1].split("\n## ")[0]
    assert "Cells: 3 same, 1 different." in section
    assert "- `c` (different, against numpy): output.rms: 5.00 against 10.0" in section
    cells_table = text.split("## Cells")[1]
    assert f"| `c` {DIFFERENT_MARK} | ok |" in cells_table
    environments = text.split("### Environments against numpy")[1].split("\n### ")[0]
    assert f"{DIFFERENT_MARK} |" in environments
    said = findings.of(cells, analysis)
    assert said.groups[0] == (findings.ANSWERS, [next(s for s in said.groups[0][1])])
    assert said.groups[0][1][0].startswith("1 of 4 compared cells computed a different answer")
    assert not any("**jax** is fastest" in s for s in said.sentences)
    assert any(s.startswith("**torch** is fastest in elementwise (run)") and "(1 of 1 rows)" in s
               for s in said.answer)
    assert said.answer[-1].startswith("1 cell(s) computed a different answer from their row "
                                      "and are not ranked")
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(*tables_of(cells, "t"))
    shown = console.export_text()
    assert f"1.00 {DIFFERENT_MARK}" in shown and "computed a different answer" in shown


def test_the_summary_carries_the_first_ok_repeats_answer():
    records = [{"cell_id": "c", "cell_name": "c", "environment": "numpy", "api": "numpy",
                "backend": None, "image": "numpy", "workload": "matmul", "task": "run",
                "batch_size": 1, **summarize.AXIS_DEFAULTS, "options": {}, "repeat": r,
                "status": status, "samples_ms": [1.0] * 3, "answer": answer}
               for r, status, answer in ((1, "failed", None), (2, "ok", output(2.0)),
                                         (3, "ok", output(2.0)))]
    (cell,) = summarize.cell_summaries(records)
    assert cell["answer"] == output(2.0)


def test_a_crafted_answer_is_data_not_a_crash():
    from runner.results.data import schemas

    odd = {"output": {"rms": "big", "mean": float("nan"), "max_abs": [1, "x"]}, "tokens": [[1], 2]}
    found, compared = answers.differences(odd, output(10.0), "float32")
    assert compared == 1 and "not finite" in found[0]           # only the mean is a number
    record = {"schema": 1, "status": "failed", "cell_id": "c", "cell_name": "c", "repeat": 1,
              "environment": "numpy", "workload": "matmul", "task": "run", "batch_size": 1}
    assert schemas.record_problem({**record, "answer": {"output": {"rms": 1.0}}}) is None
    assert "answer" in schemas.record_problem({**record, "answer": [1.0]})
    manifest = {"name": "run", "report": {"baselines": {"options": 5}}}
    assert "options must be a table" in schemas.manifest_problem(manifest)
    assert schemas.manifest_problem({"name": "run", "report": {"baselines": {"jit": False}},
                                     "cells": [{"id": "a", "check_answers": False}]}) is None
