"""The measured epoch beside the steady-state step (issue 37 item 14): a plain Keras fit of the
tiny CNN (batch 128, 8 steps per epoch, keras-tensorflow on CPU) took 77 ms a step by epoch wall
time while the runner's median step read 55 ms and its epoch_s (median × steps) 0.43 s against
~0.61 s measured: the epoch's own work (iterators, shuffling, callbacks) is a cost the
framework's choice changes."""

from __future__ import annotations

import pytest

from runner.results.analysis import derived, summaries as summarize
from runner.results.render import markdown_parts
from runner.results.analysis.report_model import table_view


def fit_record(repeat: int, boundaries: list[int], epoch_end_ms: float = 202.0) -> dict:
    """30 one-call samples of 55 ms; the epoch-end work in the samples `boundaries` names."""
    samples = [55.0] * 30
    for index in boundaries:
        samples[index] += epoch_end_ms
    return {"cell_id": "cnn", "cell_name": "cnn-fit", "environment": "keras-tensorflow",
            "api": "keras", "backend": "tensorflow", "image": "tensorflow", "workload": "cnn",
            "task": "fit", "batch_size": 128, "items_per_step": 128,
            **summarize.AXIS_DEFAULTS, "size": "tiny", "options": {"samples": 1024},
            "repeat": repeat, "status": "ok", "samples_ms": samples, "calls_per_sample": 1,
            "steps_per_call": 1, "epoch_boundary_samples": boundaries,
            "train_s": sum(samples) / 1000, "metadata": {}, "effective": {},
            "extra": {"calls_per_epoch": 8, "epoch_s": 0.055 * 8}}


def test_whole_epochs_with_their_boundaries():
    record = fit_record(1, [3, 11, 19, 27])
    # Three whole epochs between the first and the last boundary, each with its end work.
    assert derived.measured_epoch_s(record) == pytest.approx(0.055 * 8 + 0.202)
    assert record["extra"]["epoch_s"] == pytest.approx(0.44)


def test_no_whole_epoch_no_measured_figure():
    assert derived.measured_epoch_s(fit_record(1, [3])) is None
    assert derived.measured_epoch_s({**fit_record(1, [3, 11]), "extra": {}}) is None


def test_blocks_of_calls_count_the_epochs_they_span():
    record = {**fit_record(1, []), "samples_ms": [55.0] * 12, "calls_per_sample": 4,
              "epoch_boundary_samples": [1, 3, 5]}
    record["samples_ms"][1] += 202.0 / 4
    record["samples_ms"][3] += 202.0 / 4
    # Samples 1..4 cover 16 calls, two epochs, two boundaries.
    assert derived.measured_epoch_s(record) == pytest.approx(0.055 * 8 + 0.202)


def test_the_training_table_shows_both():
    records = [fit_record(r, [3, 11, 19, 27]) for r in (1, 2, 3)]
    (summary,) = summarize.cell_summaries(records)
    assert summary["epoch_measured_s"] == pytest.approx(0.642)
    assert summary["epoch_s"] == pytest.approx(0.44)
    table = markdown_parts.training_table(table_view([summary]))
    assert "Epoch s, measured | Epoch s, step × steps" in table
    assert "| 0.642 | 0.440 |" in table
