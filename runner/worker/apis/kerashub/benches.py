"""The benches every keras-hub workload shares, Keras 3 and Keras 2 alike: one batch through the
compiled train (fit_bench) or predict (predict_bench) function per timed call, and the study's
image-encoder training step (encoder_fit_bench, SAM's and Stable Diffusion's fit).

Both Keras generations run one batch through the model's compiled train / predict function per
call, which is the study's "fit / predict per batch", and return host values (NumPy or Python
floats), so the device has finished when a call returns. Keras 3 does it with train_on_batch /
predict_on_batch on tensors already on the device. Keras 2's train_on_batch / predict_on_batch
would build a tf.data dataset and iterator from the batch on every call (milliseconds of host
work, plus a device-to-host-to-device round trip of the batch that Keras 3 does not pay): Keras 2
runs the same compiled functions on one iterator made before the timed calls instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...bench import Bench
from .. import answers
from .inputs import rng

FIT_TIMING = ("one train-on-batch call per sample (one batch through the compiled train "
              "function; Keras 3: train_on_batch on tensors already on the device; Keras 2: its "
              "train_function on an iterator made once, prefetching the batch to the device); its "
              "loss is read back to the host, so the device has finished")
PREDICT_TIMING = ("one predict-on-batch call per sample (one batch through the compiled predict "
                  "function; Keras 3: predict_on_batch on tensors already on the device; Keras 2: "
                  "its predict_function on an iterator made once, prefetching the batch to the "
                  "device); outputs copied to the host")
KERAS2_FEED = ("tf.data.Dataset.from_tensors(batch).repeat(), prefetched to the device, one "
               "iterator for every call (train_on_batch would build one per call)")
KERAS3_FEED = "the batch as tensors on the device, made once"
MIRRORED_FEED = ("tf.distribute.MirroredStrategy's distributed dataset of the batch, repeated: "
                 "each replica its share (train_on_batch would hand each the whole batch), one "
                 "iterator for every call")


def is_keras2(model: Any) -> bool:
    """Whether the model is a Keras 2 (tf-keras) one: read from its own classes, not from the
    variable that asked TensorFlow for tf-keras (a user's environment may set it either way)."""
    return any(cls.__module__.split(".")[0] == "tf_keras" for cls in type(model).__mro__)


def on_device(data: Any) -> Any:
    """The batch as the backend's tensors, made once before the timed calls. The study fed
    cached tf.data batches whose copies overlap the steps; resending the same host arrays every
    call would time a host-to-device copy (SAM predict at batch 4: ~50 MB) it did not."""
    if data is None:
        return None
    import keras

    convert = keras.ops.convert_to_tensor
    if isinstance(data, dict):
        return {key: convert(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(convert(value) for value in data)
    return convert(data)


def keras2_iterator(*parts: Any) -> Any:
    """One iterator over the batch repeated, prefetched to the device: what Keras 2's
    single_batch_iterator builds per call ((x,), (x, y) or (x, y, sample_weight)), made once."""
    import tensorflow as tf

    data = tuple(part for part in parts if part is not None)
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    dataset = tf.data.Dataset.from_tensors(data).repeat()
    return iter(dataset.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=1)))


def to_host(structure: Any) -> Any:
    """Keras 2's sync_to_numpy_or_python_type: every tensor of the outputs to NumPy."""
    import tensorflow as tf

    return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, structure)


def fit_bench(model, x, y, *, batch: int, sample_weight=None, effective=None, extra=None,
              deterministic: bool = True, strategy=None) -> Bench:
    """One batch through the train function per call. Its answer is the first step's loss on
    the fixed batch, unless the step draws random numbers (dropout: each backend its own), so
    `deterministic` is False. `strategy`: a data-parallel cell's MirroredStrategy (TensorFlow;
    Keras on JAX distributes train_on_batch's batch itself)."""
    if strategy is not None:
        bench = _mirrored_bench(model, strategy, (x, y, sample_weight), batch, "train",
                                effective, extra)
        bench.loss = lambda logs: float(logs["loss"])
        bench.timing = FIT_TIMING
    else:
        bench = _fit_bench(model, x, y, batch=batch, sample_weight=sample_weight,
                           effective=effective, extra=extra)
    bench.first_loss_in_answer = deterministic
    if not deterministic:
        bench.extra["answer_note"] = ("the step draws dropout masks from each backend's own "
                                      "generator: its first loss is no answer")
    return bench


def _fit_bench(model, x, y, *, batch: int, sample_weight=None, effective=None, extra=None) -> Bench:
    if is_keras2(model):
        iterator = keras2_iterator(x, y, sample_weight)
        model.make_train_function()

        def step():
            model.reset_metrics()             # train_on_batch(reset_metrics=True), its default
            return to_host(model.train_function(iterator))

        feed = KERAS2_FEED
    else:
        x, y, sample_weight = on_device(x), on_device(y), on_device(sample_weight)

        def step():
            # train_on_batch resets the metrics itself: each call's loss is its batch's.
            return model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)

        feed = KERAS3_FEED
    # Timed call by call, the loss read back each call: as the hf cells' fit (their FIT_SYNC).
    return Bench(step=step, items_per_step=batch, loss=lambda logs: float(logs["loss"]),
                 returns_to_host=True, timing=FIT_TIMING,
                 effective={**(effective or {}), "feed": feed, "fit_sync": "per_call_loss_read"},
                 extra=dict(extra or {}))


def _mirrored_bench(model, strategy, parts, batch: int, kind: str, effective, extra) -> Bench:
    """One global batch through the train or predict function per call, split between the
    replicas by a distributed dataset (the way fit feeds them), outputs to the host."""
    from ..data_parallel.tf_mirrored import distributed_batches

    iterator = distributed_batches(strategy, *parts)
    function = model.make_train_function() if kind == "train" else \
        model.make_predict_function()
    function = function or (model.train_function if kind == "train" else model.predict_function)

    def step():
        if kind == "train":
            model.reset_metrics()
        return to_host(function(iterator))

    return Bench(step=step, items_per_step=batch, returns_to_host=True, timing=PREDICT_TIMING,
                 effective={**(effective or {}), "feed": MIRRORED_FEED}, extra=dict(extra or {}))


def predict_bench(model, x, *, batch: int, effective=None, extra=None, strategy=None) -> Bench:
    """One batch through the predict function per call; its answer: the norms of the outputs
    on the fixed batch (one more call after the timed ones)."""
    if strategy is not None:
        bench = _mirrored_bench(model, strategy, (x,), batch, "predict", effective, extra)
        bench.answer = lambda: answers.output(bench.call_step())
        return bench
    bench = _predict_bench(model, x, batch=batch, effective=effective, extra=extra)
    bench.answer = lambda: answers.output(bench.call_step())
    return bench


def _predict_bench(model, x, *, batch: int, effective=None, extra=None) -> Bench:
    if is_keras2(model):
        iterator = keras2_iterator(x)
        model.make_predict_function()

        def step():
            return to_host(model.predict_function(iterator))

        feed = KERAS2_FEED
    else:
        x = on_device(x)

        def step():
            return model.predict_on_batch(x)

        feed = KERAS3_FEED
    return Bench(step=step, items_per_step=batch, returns_to_host=True, timing=PREDICT_TIMING,
                 effective={**(effective or {}), "feed": feed}, extra=dict(extra or {}))


def jit_in_effect(model) -> object:
    """What model.compile resolved jit_compile to ("auto" becomes True or False)."""
    return getattr(model, "jit_compile", None)



def encoder_fit_bench(keras, encoder, side: int, batch: int, seed: int, facts: dict[str, Any],
                      jit_compile, doc: str) -> Bench:
    """The study's SAM and SD fit: an image encoder trained alone on images of side × side,
    MSE against fixed random targets of its output's shape, Adam."""
    images = keras.Input((side, side, 3))
    trainer = keras.Model(images, encoder(images), name="sd_image_encoder_trainer")
    out_shape = tuple(int(d) for d in trainer.output_shape[1:])
    r = rng(seed + 5)
    x = r.uniform(-1.0, 1.0, (batch, side, side, 3)).astype(np.float32)
    y = r.standard_normal((batch, *out_shape)).astype(np.float32)
    trainer.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.MeanSquaredError(),
                    jit_compile=jit_compile)
    facts.update(training_step=doc, trained_params=trainer.count_params(),
                 target_shape=list(out_shape))
    return fit_bench(trainer, x, y, batch=batch,
                     effective={"jit_compile": jit_in_effect(trainer), "image_size": side},
                     extra=facts)


