"""The CNN training workload on every API with a model loop, through the real local executor:
training works (loss falls, held-out accuracy above chance), every API starts from the same
model on the same data, the axis values reach the framework, and inapplicable cells are planned
as such. Tiny data, few steps: about five minutes on a 2-core CPU machine."""

from __future__ import annotations

import json
import statistics

import pytest

from runner import cli
from runner.worker.apis.cnn_common import PARAMETERS
from tests.matrices import matrix_text

pytestmark = pytest.mark.slow

BATCH = 64
STEPS = 10
FLOAT32_ENVIRONMENTS = ("keras-tensorflow", "keras-jax", "keras-torch", "keras2", "torch", "jax",
                        "tensorflow")
MATRIX = matrix_text("cnn", steps=STEPS, timeout=600,
                     environments=[*FLOAT32_ENVIRONMENTS, "hf-torch"], benchmarks=[
    # Every API as its users run it by default, float32.
    {"workload": "cnn", "environments": ["*"], "batch_size": BATCH, "size": "tiny"},
    # Keras axes together: XLA on, a mixed policy, 2 steps per train-function call, tf.data.
    {"workload": "cnn", "environments": ["keras-tensorflow"], "batch_size": BATCH, "size": "tiny",
     "jit": True, "precision": "mixed_bfloat16", "steps_per_execution": 2, "data": "dataset"},
    # One torch.compile mode (compiling takes about a minute here), data preloaded on the device.
    {"workload": "cnn", "environments": ["torch"], "batch_size": BATCH, "size": "tiny",
     "jit": "default", "data": "device", "steps": 2},
    # Planned as not applicable: steps_per_execution outside Keras and on Keras' torch backend.
    {"workload": "cnn", "environments": ["torch", "jax", "keras-torch"], "batch_size": BATCH,
     "size": "tiny", "steps_per_execution": 4},
    # Data-parallel on two virtual CPU devices (docs/scaling.md), strong scaling: the global
    # batch is the 1-device cells' BATCH, so every framework's first step computes their loss.
    {"workload": "cnn", "environments": ["*"], "batch_size": BATCH, "size": "tiny", "devices": 2,
     "scaling": "strong"},
    # ... and DDP on Hugging Face's BERT (torch processes launched by the worker, as for the CNN).
    {"workload": "bert", "task": "fit", "environments": ["hf-torch"], "batch_size": 4,
     "size": "tiny", "devices": 2, "options": {"sequence_length": 16}},
])


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("cnn")
    matrix = folder / "matrix.toml"
    matrix.write_text(MATRIX)
    code = cli.main([str(matrix), "--results-dir", str(folder / "results")])
    (run,) = list((folder / "results" / "cnn").iterdir())
    found = [json.loads(path.read_text()) for path in sorted((run / "cells").glob("*.json"))]
    failed = {r["environment"]: r["error"] for r in found if r["status"] not in ("ok", "not_applicable")}
    assert code == 0 and not failed, failed
    return found


def pick(records: list[dict], environment: str, **axes) -> dict:
    axes = {"precision": "float32", "jit": "auto", "steps_per_execution": 1, "data": "device",
            "devices": 1, **axes}
    (record,) = [r for r in records if r["environment"] == environment
                 and all(r[k] == v for k, v in axes.items())]
    return record


def baseline(records: list[dict]) -> dict[str, dict]:
    return {env: pick(records, env) for env in FLOAT32_ENVIRONMENTS}


def test_every_api_trains(records):
    for env, record in baseline(records).items():
        extra = record["extra"]
        assert record["status"] == "ok", env
        assert extra["parameters"] == PARAMETERS == 562_228, env
        assert record["loss_last"] < record["loss_first"], env
        assert extra["held_out_loss"] < extra["initial_loss"], env
        # Chance is 0.1; on 512 held-out samples its standard deviation is 0.013, so 0.15 is
        # almost four of them above chance (measured after 11 steps: 0.2 to 0.5).
        assert record["accuracy"] > 0.15, (env, record["accuracy"])


def test_fields_the_training_report_reads(records):
    for env, record in baseline(records).items():
        for key in ("accuracy", "loss_first", "loss_last", "train_s", "rss_initial_mb",
                    "rss_peak_mb"):
            assert isinstance(record[key], float), (env, key)
        assert record["vram_initial_mb"] is None and record["vram_peak_mb"] is None  # no GPU
        extra = record["extra"]
        assert extra["samples"] == 1024 and extra["steps_per_epoch"] == 1024 // BATCH
        # epoch_s is the median timed step times the steps of one epoch.
        median_s = statistics.median(record["samples_ms"]) / 1000
        assert extra["epoch_s"] == pytest.approx(median_s * extra["steps_per_epoch"], rel=1e-6)


def test_same_seed_same_data_and_same_initial_model(records):
    runs = baseline(records)
    assert len({r["extra"]["data_sha256"] for r in runs.values()}) == 1
    assert len({r["extra"]["init_sha256"] for r in runs.values()}) == 1
    # Same NumPy weights, same probe batch, float32 forward passes that differ only in the order
    # of their sums (convolution algorithms, channels-first torch): the rounding error of a
    # float32 dot product of n ≤ 3 136 terms grows like √n · 6e-8 ≈ 4e-6 relative, on logits of
    # about 0.1, and the mean loss averages it further (measured spread: under 1e-6). 1e-4 is
    # far above that and far below what a wrong layout does (a transposed kernel or a
    # channels-first flatten moves the logits by a few hundredths).
    losses = [r["extra"]["initial_loss"] for r in runs.values()]
    assert max(losses) - min(losses) < 1e-4, losses
    def logits(record: dict) -> list[float]:
        return [z for row in record["extra"]["initial_logits_head"] for z in row]

    reference = logits(runs["keras-tensorflow"])
    for env, record in runs.items():
        assert logits(record) == pytest.approx(reference, abs=1e-4), env
    # The native loops share one batch order, so even their first training losses agree.
    firsts = [runs[env]["loss_first"] for env in ("torch", "jax", "tensorflow")]
    assert max(firsts) - min(firsts) < 1e-4, firsts


def test_axis_values_reach_the_framework(records):
    runs = baseline(records)
    # Keras' jit_compile="auto" resolves per backend (no XLA on a CPU-only TensorFlow).
    assert runs["keras-tensorflow"]["effective"]["jit_compile"] is False
    assert runs["keras-jax"]["effective"]["jit_compile"] is True
    assert runs["keras-torch"]["effective"]["jit_compile"] is False
    assert runs["keras2"]["effective"]["jit_compile"] is False
    for env in ("keras-tensorflow", "keras-jax", "keras-torch", "keras2"):
        assert runs[env]["effective"]["dtype_policy"] == "float32", env
    assert runs["torch"]["effective"]["jit"] == "eager"
    assert runs["jax"]["effective"]["jit"] == "jax.jit"
    assert runs["tensorflow"]["effective"]["jit"] == "tf.function(jit_compile=False)"

    keras = pick(records, "keras-tensorflow", jit=True, precision="mixed_bfloat16",
                 steps_per_execution=2, data="dataset")
    assert keras["status"] == "ok"
    assert keras["effective"]["dtype_policy"] == "mixed_bfloat16"
    assert keras["effective"]["compute_dtype"] == "bfloat16"
    assert keras["effective"]["variable_dtype"] == "float32"
    assert keras["effective"]["jit_compile"] is True
    assert keras["effective"]["steps_per_execution"] == 2
    assert keras["effective"]["data"].startswith("tf.data")
    assert keras["steps_per_call"] == 2 and len(keras["samples_ms"]) == STEPS // 2

    torch = pick(records, "torch", jit="default", data="device")
    assert torch["status"] == "ok"
    assert torch["effective"]["jit"] == "torch.compile(mode='default')"
    assert torch["effective"]["data"].startswith("tensors preloaded on the device")


KERAS_ENVIRONMENTS = ("keras-tensorflow", "keras-jax", "keras-torch", "keras2")


def test_every_api_is_timed_by_the_same_block_method(records):
    """Blocks of calls with one synchronisation at each block's end, Keras fit included; fit's
    batch-end dispatch as in a plain fit (asynchronous where the backend has it)."""
    for env, record in baseline(records).items():
        assert record["timing"].startswith("blocks of "), (env, record["timing"])
        assert record["calls_per_sample"] >= 1 and record["effective"]["tf32"] is False, env
        assert record["effective"]["gc_in_timed_window"] == "disabled", env
        assert record["compilations"]["timed"] == 0, (env, record["compilations"])
    for env in KERAS_ENVIRONMENTS:
        effective = baseline(records)[env]["effective"]
        assert "on_train_batch_begin" in effective["fit_callbacks"], env
        if env != "keras2":
            assert effective["keras_async_batch_end"] == effective["keras_async_batch_end_plain_fit"]
        else:
            assert effective["keras2_batch_logs_converted"] is False
    assert baseline(records)["keras-jax"]["effective"]["keras_async_batch_end"] is True
    assert baseline(records)["keras-torch"]["effective"]["keras_async_batch_end"] is True


def test_steps_per_execution_is_not_applicable_outside_keras(records):
    reasons = {r["environment"]: r["error"] for r in records if r["steps_per_execution"] == 4}
    assert {r["status"] for r in records if r["steps_per_execution"] == 4} == {"not_applicable"}
    assert reasons == {"torch": "steps_per_execution is a Keras setting",
                       "jax": "steps_per_execution is a Keras setting",
                       "keras-torch": "Keras on PyTorch requires steps_per_execution = 1"}


STRATEGIES = {"keras-tensorflow": "tf.distribute.MirroredStrategy",
              "keras-jax": "keras.distribution.DataParallel",
              "keras2": "tf.distribute.MirroredStrategy",
              "torch": "torch.nn.parallel.DistributedDataParallel",
              "jax": "jax.sharding (NamedSharding: batch sharded, parameters replicated)",
              "tensorflow": "tf.distribute.MirroredStrategy"}


def test_every_framework_trains_on_two_devices_and_computes_one_devices_first_loss(records):
    for env, strategy in STRATEGIES.items():
        one, two = pick(records, env), pick(records, env, devices=2, scaling="strong")
        assert two["status"] == "ok", (env, two["error"])
        facts = two["effective"]["data_parallel"]
        assert facts["strategy"] == strategy and facts["world_size"] == 2, (env, facts)
        assert (facts["global_batch"], facts["per_device_batch"]) == (BATCH, BATCH // 2), env
        assert two["items_per_step"] == one["items_per_step"] == BATCH, env
        # The same global batch from the same weights: one step's loss is the 1-device cell's
        # up to float32 rounding of a sum split in two (measured: under 1e-6 relative).
        assert two["loss_first"] == pytest.approx(one["loss_first"], rel=1e-4), env
        assert two["compilations"]["timed"] in (0, one["compilations"]["timed"]), env
    ddp = pick(records, "torch", devices=2, scaling="strong")
    assert ddp["effective"]["data_parallel"]["all_reduce"] == "gloo"
    assert [r["rank"] for r in ddp["extra"]["ranks"]] == [0, 1]
    assert all(r["status"] == "ok" and r["rss_peak_mb"] > 0 for r in ddp["extra"]["ranks"])
    virtual = pick(records, "jax", devices=2, scaling="strong")["effective"]["data_parallel"]
    assert virtual["devices"] == ["cpu:0", "cpu:1"]


def test_keras_on_torch_has_no_data_parallel_fit_and_says_why(records):
    record = pick(records, "keras-torch", devices=2, scaling="strong")
    assert record["status"] == "not_applicable"
    assert "keras.distribution has no torch backend" in record["error"]


def test_ddp_trains_hugging_faces_bert_with_every_ranks_memory(records):
    (bert,) = [r for r in records if r["workload"] == "bert"]
    assert bert["status"] == "ok" and bert["loss_first"] > 0
    facts = bert["effective"]["data_parallel"]
    assert facts["strategy"] == "torch.nn.parallel.DistributedDataParallel"
    assert (facts["world_size"], facts["global_batch"], facts["per_device_batch"]) == (2, 8, 4)
    assert len(bert["extra"]["ranks"]) == 2 and bert["items_per_step"] == 8
