"""What the timed calls do besides the step, checked in the real environments (CPU): no host to
device copy per step in the torch CNN's on-device data path, Keras fit timed without touching its
batch-end dispatch, Keras 2 fed without an iterator built per call.

Each test runs a short script in an environment's own interpreter (the cached local environments,
as tests/worker/test_async_timing.py does): the worker code is imported there and driven
directly."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from runner.environments import venvs
from runner.paths import REPO_ROOT as REPO
from runner.worker.bench import calibration_schedule, preroll_calls

pytestmark = pytest.mark.slow


# A spec for build(spec, fw): the tiny CNN (1 024 samples) at batch 64, 16 steps per epoch.
SPEC = """
from runner.worker.protocol import CellSpec

def spec(api, backend=None, **axes):
    values = dict(run_id="t", cell_id="c", cell_name="cnn", repeat=1, environment="e", api=api,
                  backend=backend, image=None, workload="cnn", task="fit", batch_size=64,
                  precision="float32", jit="auto", size="tiny", tf32=None, steps_per_execution=1,
                  data="device", device="cpu", options={"samples": 1024}, steps=40,
                  warmup_steps=1, seed=0, result_path="")
    values.update(axes)
    return CellSpec(**values)
"""


def run_script(image: str, body: str, tmp_path: Path, **env: str) -> dict:
    """Run SPEC + body in the environment of `image`; the body prints one JSON object last."""
    python = venvs.build(image).python
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SPEC) + textwrap.dedent(body), encoding="utf-8")
    done = subprocess.run([str(python), "-P", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
                               "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torch_device_data_copies_indices_once_per_epoch_not_per_step(tmp_path):
    """A `.to(device)` per step from pageable host memory is a blocking copy that synchronises
    the stream (the old index path): every device-targeted `.to` during the timed loop is
    counted, against the epochs the loop runs through."""
    out = run_script("torch", """
        import json, torch
        from runner.worker.apis.torch_api import Framework
        from runner.worker.apis.torch_api import cnn
        from runner.worker.bench import StepClock, run_loop

        fw = Framework(spec("torch"))
        bench = cnn.build(spec("torch"), fw)
        moves = []
        original = torch.Tensor.to

        def counting_to(self, *args, **kwargs):
            targets = list(args) + list(kwargs.values())
            if any(isinstance(a, (torch.device, str)) for a in targets):
                moves.append(tuple(self.shape))
            return original(self, *args, **kwargs)

        torch.Tensor.to = counting_to
        clock = StepClock(warmup_calls=1, timed_calls=40, sync=fw.sync)
        clock.calibrate = lambda: 4
        run_loop(bench, clock)
        torch.Tensor.to = original
        print(json.dumps({"moves": moves, "calls": clock.calls,
                          "data": bench.effective["data"]}))
    """, tmp_path)
    epochs = -(-out["calls"] // 16)                  # 41 steps: 3 epochs of 16 steps
    # One copy of a whole epoch's (16, 64) index array per epoch, none per step.
    assert out["moves"] == [[16, 64]] * epochs, out["moves"]
    assert out["calls"] == 41 and "once per epoch" in out["data"]


KERAS_FIT = """
    import json, time
    import keras
    from runner.worker.apis.keras_api import Framework
    from runner.worker.apis.keras_api import cnn
    from runner.worker.bench import StepClock, run_loop

    lists = []
    original_init = keras.callbacks.CallbackList.__init__

    def capture(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        lists.append(self)

    keras.callbacks.CallbackList.__init__ = capture
    cell = spec("keras", BACKEND, batch_size=16, steps=STEPS, calls_per_sample=GIVEN)
    fw = Framework(cell)
    bench = cnn.build(cell, fw)
    syncs, unfinished = [], []

    def sync(out):
        syncs.append(time.perf_counter())
        bench.sync(out)
        state = getattr(lists[-1].model, "_jax_state", None) if lists else None
        if state:        # JAX dispatches asynchronously, on a CPU too: the wait must be real
            unfinished.extend(a for group in state.values() for a in group or ()
                              if not a.is_ready())

    # As the worker's timed_window builds it: a block size the host handed over is the clock's.
    clock = StepClock(warmup_calls=1, timed_calls=STEPS, sync=sync, calls_per_sample=GIVEN or 1,
                      block_source="handed_over" if GIVEN else "per_call")
    lists.clear()                           # from here on: the lists fit itself builds
    run_loop(bench, clock)
    fit_lists = list(lists)
    plain = keras.callbacks.CallbackList([])
    print(json.dumps({
        "async_train": [l._async_train for l in fit_lists], "plain": plain._async_train,
        "calls_per_sample": clock.calls_per_sample, "samples": len(clock.timed_s),
        "syncs": len(syncs), "unfinished": len(unfinished), "warmup": len(clock.warmup_s),
        "loss": [clock.first_out, clock.last_out],
        "effective": bench.effective, "calibration": bench.extra.get("block_calibration"),
        "preroll_calls": bench.extra.get("preroll_calls"), "block_source": clock.block_source}))
"""


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_keras_fit_keeps_async_dispatch_and_times_blocks(backend, tmp_path):
    """The CallbackList fit builds around the clock's callback decides asynchronous batch-end
    dispatch as for a plain fit, and one sample is a block of calls with one synchronisation
    (given calls_per_sample = 4, 8 blocks of 4 calls: 32 timed calls)."""
    body = KERAS_FIT.replace("BACKEND", repr(backend)).replace("STEPS", "32").replace("GIVEN", "4")
    out = run_script("torch" if backend == "torch" else "jax", body, tmp_path,
                     KERAS_BACKEND=backend)
    assert out["async_train"] == [True] and out["plain"] is True
    assert out["effective"]["keras_async_batch_end"] is True
    assert out["calls_per_sample"] == 4 and out["samples"] == 8
    assert out["block_source"] == "handed_over" and out["calibration"] is None
    # The handed block's pre-roll: the calibration's blocks (1, 1, 2, 2, 4, 4 calls), untimed.
    assert out["preroll_calls"] == preroll_calls(4) == 14
    # One synchronisation per warm-up call, per pre-roll block and per timed block, none per
    # call; each one waits for the whole newest training state (JAX: Keras keeps it in a
    # tracked dict).
    assert out["syncs"] == out["warmup"] + len(calibration_schedule(4)) + out["samples"]
    assert out["unfinished"] == 0
    first, last = out["loss"]
    assert isinstance(first, float) and isinstance(last, float) and last < first


def test_keras_fit_calibrates_its_block_in_fit(tmp_path):
    """Without a given block size the fit calibrates one, as the native loops do: trials of
    1, 1, 2, 2, ... calls until one lasts 10 ms (a CPU step at batch 16 takes a few ms)."""
    body = KERAS_FIT.replace("BACKEND", "'torch'").replace("STEPS", "40").replace("GIVEN", "None")
    out = run_script("torch", body, tmp_path, KERAS_BACKEND="torch")
    trials = out["calibration"]
    assert trials and [c for c, _ in trials[:2]] == [1, 1]
    assert out["calls_per_sample"] == min(trials[-1][0], 40 // 10)
    assert out["block_source"] == "calibrated"
    assert out["samples"] * out["calls_per_sample"] >= 40
    assert out["syncs"] == out["warmup"] + len(trials) + out["samples"]
    assert out["preroll_calls"] == sum(c for c, _ in trials)


# The Keras 2 benches of every keras-hub workload (and the layer family) on a small tf-keras
# model: what is checked is the benches' feed, which is the same for any model (the keras-hub
# models on Keras 2 run in tests/worker/test_kerashub.py, whose records carry this feed; BERT
# here took 97 s of a CI's slow stage, 2026-11-29, for the same check).
KERAS2_BENCHES = """
    import json
    import numpy as np
    import tensorflow as tf
    import tf_keras
    from runner.worker.apis.kerashub import benches
    from runner.worker.bench import StepClock, run_loop

    model = tf_keras.Sequential([tf_keras.Input((8,)), tf_keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 8), np.float32), np.zeros((4, 2), np.float32)
    built = []
    original = tf.data.Dataset.from_tensors
    tf.data.Dataset.from_tensors = lambda *a, **k: (built.append(1), original(*a, **k))[1]
    out = {}
    for task in ("fit", "predict"):
        built.clear()
        bench = (benches.fit_bench(model, x, y, batch=4) if task == "fit"
                 else benches.predict_bench(model, x, batch=4))
        made = len(built)
        clock = StepClock(warmup_calls=1, timed_calls=6, sync=lambda o: None)
        run_loop(bench, clock)
        out[task] = {"datasets_made": made, "datasets_built": len(built) - made,
                     "samples": len(clock.timed_s),
                     "loss": bench.loss(clock.last_out) if bench.loss else None,
                     "feed": bench.effective.get("feed")}
    print(json.dumps(out))
"""


def test_keras2_builds_no_dataset_per_call(tmp_path):
    """Keras 2's train_on_batch / predict_on_batch build a tf.data dataset and iterator on every
    call (Keras 3's do not): the Keras 2 benches are fed from one iterator made before the
    calls."""
    out = run_script("keras2-tf215", KERAS2_BENCHES, tmp_path, TF_USE_LEGACY_KERAS="1")
    for task in ("fit", "predict"):
        assert out[task]["samples"] == 6 and out[task]["datasets_built"] == 0, out
        assert out[task]["datasets_made"] == 1, out
        assert "one iterator" in out[task]["feed"]
    assert out["fit"]["loss"] > 0


# The data axis on every API: each feed the worker makes draws the same seeded batches (the
# shared order, cnn_common.epoch_orders) — the native loops' three ways and the pipelines Keras
# fit reads (tf.data, DataLoader, PyDataset). 20 batches of 64 from 1 024 samples: the first
# epoch (16 batches) and the start of the second, reshuffled.
BATCHES = 20
DRAW = """
    import hashlib, json, os
    import numpy as np
    from runner.worker.apis import cnn_common as cc, feeds

    def digest(x, y, channels_first=False):
        x, y = np.asarray(x, np.float32), np.asarray(y)
        x = x.transpose(0, 2, 3, 1) if channels_first else x
        return [hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16],
                y.astype(int).tolist()]

    def passes(pipeline):
        # A pipeline iterated once per epoch, as fit iterates it (a PyDataset: by index, then
        # its epoch end).
        while True:
            if hasattr(pipeline, "on_epoch_end"):
                yield from (pipeline[i] for i in range(len(pipeline)))
                pipeline.on_epoch_end()
            else:
                yield from pipeline

    def draw(batches, numpy, **kwargs):
        return [digest(*(numpy(part) for part in next(batches)), **kwargs)
                for _ in range(BATCHES)]

    cell = spec(API, workload="cnn")
    data = cc.make_data(cell)
    out = {}
"""
NATIVE = """
    from runner.worker.apis.API_PACKAGE import Framework, cnn

    fw = Framework(cell)
    for mode in ("arrays", "dataset", "device"):
        batches, _ = feeds.chosen(mode, cnn.ways(cell, fw, data))
        out[f"API {mode}"] = draw(batches, NUMPY, **KWARGS)
"""
KERAS = """
    os.environ["KERAS_BACKEND"] = BACKEND
    import KERAS_MODULE as keras

    from runner.worker.apis.keras_api.feeds import training_data

    args, _ = training_data(keras, BACKEND, data, "dataset", cell.seed)
    out[f"LABEL dataset"] = draw(passes(args["x"]), NUMPY)
"""


def feed_script(api: str, numpy: str, keras: tuple[str, str, str] | None = None,
                native: bool = True, channels_first: bool = False) -> str:
    """DRAW, then the native API's three ways and/or one Keras pipeline, printing the batches."""
    body = DRAW.replace("BATCHES", str(BATCHES)).replace("API", repr(api))
    if native:
        body += NATIVE.replace("API_PACKAGE", f"{api}_api").replace("API", api) \
            .replace("NUMPY", numpy).replace("KWARGS", repr({"channels_first": channels_first}))
    if keras is not None:
        label, module, backend = keras
        body += KERAS.replace("LABEL", label).replace("KERAS_MODULE", module) \
            .replace("BACKEND", repr(backend)).replace("NUMPY", numpy)
    return body + "\n    print(json.dumps(out))\n"


def expected_batches() -> list[list]:
    """The shared order, computed here with NumPy alone."""
    import hashlib

    import numpy as np

    from runner.worker.apis import cnn_common as cc

    namespace: dict = {}
    exec(textwrap.dedent(SPEC), namespace)                  # the spec() the scripts use
    data = cc.make_data(namespace["spec"]("torch", workload="cnn"))
    rows = cc.batch_indices(len(data.y_train), data.batch_size, 0)
    out = []
    for _ in range(BATCHES):
        picked = next(rows)
        x = np.ascontiguousarray(data.x_train[picked], np.float32)
        out.append([hashlib.sha256(x.tobytes()).hexdigest()[:16],
                    data.y_train[picked].astype(int).tolist()])
    return out


def test_every_api_feeds_the_same_seeded_batches_in_every_data_mode(tmp_path):
    """Native torch, JAX and TensorFlow in each of arrays / dataset / device, and the dataset
    pipelines Keras fit reads on each backend and on Keras 2: the same images and labels, batch
    by batch, across an epoch's end. Before the shared feed only torch's own DataLoader was
    seeded (Keras on torch's was not), and no dataset pipeline drew the order the other data
    modes did."""
    as_numpy = {"torch": "lambda t: t.cpu().numpy()", "jax": "np.asarray",
                "tensorflow": "lambda t: t.numpy()"}
    runs = [
        ("torch", feed_script("torch", as_numpy["torch"], ("keras-torch", "keras", "torch"),
                              channels_first=True), {"KERAS_BACKEND": "torch"}),
        ("jax", feed_script("jax", as_numpy["jax"], ("keras-jax", "keras", "jax")),
         {"KERAS_BACKEND": "jax"}),
        ("tensorflow", feed_script("tensorflow", as_numpy["tensorflow"],
                                   ("keras-tensorflow", "keras", "tensorflow")),
         {"KERAS_BACKEND": "tensorflow"}),
        ("tf-keras", feed_script("tf-keras", as_numpy["tensorflow"],
                                 ("keras2", "tf_keras", "tensorflow"), native=False),
         {"TF_USE_LEGACY_KERAS": "1"}),
    ]
    fed: dict[str, list] = {}
    for image, body, env in runs:
        folder = tmp_path / image
        folder.mkdir()
        fed.update(run_script(image, body, folder, **env))
    assert sorted(fed) == sorted(
        [f"{api} {mode}" for api in ("torch", "jax", "tensorflow")
         for mode in ("arrays", "dataset", "device")]
        + [f"{keras} dataset" for keras in ("keras-torch", "keras-jax", "keras-tensorflow",
                                            "keras2")])
    expected = expected_batches()
    assert expected[0] != expected[16]                       # a new epoch, reshuffled
    for name, batches in fed.items():
        assert batches == expected, name
