"""The scaling analysis (runner/results/analysis/scaling.py) on a data-parallel run's records
(synthetic.scaling_records: efficiencies and one wrong all-reduce known by construction)."""

from __future__ import annotations

import pytest
from tests.results.synthetic import scaling_records

from runner.results.analysis import answers
from runner.results.analysis.scaling import (DIFFERENT, NOT_COMPARED, SAME, findings,
                                             scaling_rows)
from runner.results.analysis.summaries import cell_summaries


@pytest.fixture(scope="module")
def rows():
    summaries = cell_summaries(scaling_records())
    return scaling_rows(answers.checked(summaries))


def test_one_row_per_setting_with_every_device_count_and_environment(rows):
    (row,) = rows
    assert row.label == "cnn (fit) [scaling=strong]" and row.batch_size == 128
    assert row.devices == [1, 2, 4, 8] and list(row.environments) == ["keras-jax", "torch"]
    assert row.point("keras-jax", 8) is None
    assert row.point("torch", 8).cell["status"] == "not_applicable"


def test_efficiency_is_items_per_s_at_n_over_n_times_one_device_with_its_interval(rows):
    (row,) = rows
    for env, devices, expected in (("keras-jax", 2, 0.9), ("keras-jax", 4, 0.8),
                                   ("torch", 2, 0.95), ("torch", 4, 0.95)):
        point = row.point(env, devices)
        assert point.efficiency.ratio == pytest.approx(expected, rel=1e-6)
        assert point.efficiency.low < expected < point.efficiency.high      # 3 repeats a side
        one = row.point(env, 1)
        assert point.items_per_s / (devices * one.items_per_s) == pytest.approx(expected)
    assert row.point("keras-jax", 1).efficiency is None                     # the baseline


def test_the_answer_across_device_counts_catches_a_wrong_all_reduce(rows):
    (row,) = rows
    assert row.point("keras-jax", 2).answer == SAME
    assert row.point("torch", 2).answer == SAME
    wrong = row.point("torch", 4)
    assert wrong.answer == DIFFERENT and "first_step_loss" in wrong.answer_detail
    assert row.point("torch", 8).answer == ""


def test_weak_scaling_compares_with_the_one_device_cell_at_the_global_batch():
    records = [r for r in scaling_records() if r["devices"] in (1, 2)]
    for record in records:
        record["scaling"] = "weak"
        if record["devices"] == 2:
            record["batch_size"] = 64                    # per device: 2 × 64 = 128 in all
            record["effective"]["data_parallel"]["global_batch"] = 128
    summaries = cell_summaries(records)
    by_name = {(r.label, r.batch_size): r for r in scaling_rows(summaries)}
    assert by_name == {}         # weak: batch 64 at 2 devices, batch 128 at 1: no common row
    records += [{**r, "batch_size": 64, "cell_id": r["cell_id"] + "-b64", "items_per_step": 64}
                for r in records if r["devices"] == 1]
    summaries = cell_summaries(records)
    (row,) = scaling_rows(summaries)
    assert row.batch_size == 64 and row.point("torch", 2).answer == SAME     # vs batch 128
    record = next(s for s in summaries if s["devices"] == 2 and s["environment"] == "torch")
    record["data_parallel"]["global_batch"] = 256
    (row,) = scaling_rows(summaries)
    assert row.point("torch", 2).answer == NOT_COMPARED


def test_a_finding_per_row_and_one_per_different_answer(rows):
    said = findings(rows)
    assert said[0].startswith("cnn (fit) [scaling=strong], batch 128: of linear scaling, "
                              "keras-jax 0.80 (95 % CI ")
    assert "at 4 devices, torch 0.95 (95 % CI" in said[0] and said[0].endswith("at 4 devices.")
    assert said[1].startswith("cnn (fit) [scaling=strong], batch 128: torch at 4 devices "
                              "computed a different answer from one device")


def test_a_data_parallel_cells_energy_is_not_one_gpus_energy():
    from runner.results.analysis.stats import energy_of

    record = {"gpu_energy_j": 500.0, "devices": 4, "samples_ms": [10.0] * 50, "train_s": 5.0}
    figures, why = energy_of(record)
    assert figures is None and "first GPU only" in why
    assert energy_of({**record, "devices": 1})[0] is not None


def test_an_efficiency_above_one_is_marked_and_explained():
    """Issue 59 item 11: torch's 4 devices at 1.14 of linear read as the framework scaling
    better than linear; it is marked superlinear, with its usual cause, in the finding and the
    report's table."""
    from runner.results.analysis import scaling
    from runner.results.render import markdown_scaling
    # torch at 4 devices: its step 1 / 1.2 of what 0.95 efficiency gave, so 0.95 × 1.2 = 1.14
    records = [{**r, "samples_ms": [s / 1.2 for s in r["samples_ms"]]}
               if r["environment"] == "torch" and r["devices"] == 4 else r
               for r in scaling_records()]
    (row,) = scaling_rows(cell_summaries(records))
    efficiency = row.point("torch", 4).efficiency
    assert efficiency.ratio == pytest.approx(1.14) and efficiency.low > 1
    assert scaling.efficiency_text(efficiency).startswith("1.14 ‼ (95 % CI ")
    said = findings([row])[0]
    assert "torch 1.14 ‼ (95 % CI" in said and "(superlinear: usually a thread or cache " \
        "effect)" in said
    report = type("Report", (), {"model": type("Model", (), {"scaling": [row]})(), "plots": []})
    text = "\n".join(markdown_scaling.scaling_part(report))
    assert scaling.SUPERLINEAR_NOTE in text
