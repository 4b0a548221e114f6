"""The tuned tier's knobs reach the real frameworks (docs/tuned.md): a run's tier = "tuned" cells
read a tuning folder's tuned.toml (written here as `tune` writes it) and the worker applies each
knob its API declares — channels-last on native torch's CNN, buffer donation on native JAX's,
steps_per_execution on Keras 3 over JAX, the fused AdamW and the model's own attention on
Hugging Face's BERT — and says so in `effective`; a knob changes the time, never the answer
(the first loss of a tuned cell is its defaults cell's). About two minutes on a 2-core CPU."""

from __future__ import annotations

import json
import math

import pytest

from runner import cli
from runner.results.data import tuning as stored
from runner.run.tiers import defaults_twin
from runner.schema.matrix import load
from tests.matrices import matrix_text

pytestmark = pytest.mark.slow

KNOBS = {"torch": {"channels_last": True}, "jax": {"donate": True},
         "keras-jax": {"steps_per_execution": 4},
         "hf-torch": {"fused_optimizer": True, "attention": "eager"}}
CNN = {"workload": "cnn", "task": "fit", "batch_size": 32, "size": "tiny"}
MATRIX = matrix_text("tuned-knobs", steps=4, timeout=600,
                     environments=list(KNOBS), benchmarks=[
    # torch and JAX at both tiers: the tuned cell's first loss is the defaults cell's
    {**CNN, "environments": ["torch", "jax"], "tier": ["defaults", "tuned"]},
    {**CNN, "environments": ["keras-jax"], "tier": "tuned"},
    {"workload": "bert", "task": "fit", "environments": ["hf-torch"], "batch_size": 4,
     "size": "tiny", "options": {"sequence_length": 16}, "tier": "tuned"},
])


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("tuned-knobs")
    matrix = folder / "matrix.toml"
    matrix.write_text(MATRIX)
    tuning = folder / "tuning"
    tuning.mkdir()
    entries = {}
    for cell in load(matrix).cells:
        if cell.axes.tier == "tuned":
            name = defaults_twin(cell).name
            entries[name] = stored.Tuned(name, "cpu", "", knobs=KNOBS[cell.environment])
    stored.write_tuned(tuning, entries, str(matrix))
    code = cli.main([str(matrix), "--results-dir", str(folder / "results"),
                     "--tuning", str(tuning)])
    (run,) = list((folder / "results" / "tuned-knobs").iterdir())
    found = [json.loads(path.read_text()) for path in sorted((run / "cells").glob("*.json"))]
    failed = {r["cell_name"]: r["error"] for r in found if r["status"] != "ok"}
    assert code == 0 and not failed, failed
    return found


def tuned(records: list[dict], environment: str) -> dict:
    (record,) = [r for r in records if r["environment"] == environment and r["tier"] == "tuned"]
    assert record["tuning"] == KNOBS[environment]
    assert record["effective"]["tuning"] == KNOBS[environment]
    return record


def test_channels_last_and_donation_reach_torch_and_jax(records):
    assert tuned(records, "torch")["effective"]["memory_format"] == "channels_last"
    assert tuned(records, "jax")["effective"]["donate_argnums"] == [0]
    defaults = [r for r in records if r["tier"] == "defaults"]
    assert {r["environment"] for r in defaults} == {"torch", "jax"}
    assert all("donate_argnums" not in r["effective"] for r in defaults)
    assert [r["effective"]["memory_format"] for r in defaults
            if r["environment"] == "torch"] == ["contiguous_format"]


def test_keras_runs_the_tuned_steps_per_execution(records):
    record = tuned(records, "keras-jax")
    assert record["steps_per_execution"] == 1            # the cell keeps its own coordinate
    assert record["effective"]["steps_per_execution"] == 4 == record["steps_per_call"]


def test_hugging_face_fuses_its_optimizer_and_takes_the_models_attention(records):
    effective = tuned(records, "hf-torch")["effective"]
    assert effective["optimizer_fused"] is True
    assert effective["attn_implementation"] == "eager"


def test_a_knob_changes_the_time_never_the_answer(records):
    for environment in ("torch", "jax"):
        first = {r["tier"]: r["loss_first"] for r in records if r["environment"] == environment}
        assert math.isclose(first["tuned"], first["defaults"], rel_tol=1e-4), (environment, first)
