"""The CNN trained with native TensorFlow: a tf.Module of tf.Variables and tf.nn ops, a train
step under tf.function (jit_compile from the jit axis, via fw.compile) with GradientTape, and
RMSprop written out on the variables (no Keras in this API).

Precision: variables and optimizer state in the parameter dtype, the forward and backward passes
in the compute dtype (variables cast on read), loss in float32; mixed_float16 uses no loss
scaling. Data axis: "arrays" slices NumPy arrays per step and converts them to tensors; "dataset"
is tf.data (shuffle, batch, prefetch(AUTOTUNE)); "device" makes the training set tensors on the
device once and gathers each batch there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ...protocol import CellSpec
from ...bench import Bench
from .. import cnn_common as cc
from ..data_parallel.tf_mirrored import mirrored_step, per_replica
from . import Framework

DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}


class Cnn(tf.Module):
    def __init__(self, weights: list[np.ndarray], param_dtype, compute_dtype):
        super().__init__(name="cnn")
        self.compute_dtype = compute_dtype
        self.weights = [tf.Variable(tf.cast(w, param_dtype)) for w in weights]

    def __call__(self, x):
        w = [tf.cast(v, self.compute_dtype) for v in self.weights]
        x = tf.cast(x, self.compute_dtype)
        for index in range(len(cc.CONV_FILTERS)):
            x = tf.nn.relu(tf.nn.conv2d(x, w[2 * index], 1, "SAME") + w[2 * index + 1])
            if index % 2 == 1:
                x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        x = tf.reshape(x, (-1, cc.FLAT))                       # height, width, channel order
        x = tf.nn.relu(x @ w[-4] + w[-3])
        return tf.cast(x @ w[-2] + w[-1], tf.float32)


class RMSprop(tf.Module):
    """v ← ρv + (1−ρ)g²;  w ← w − lr·g / √(v + ε), as tf.keras.optimizers.RMSprop does."""

    def __init__(self, variables):
        super().__init__(name="rmsprop")
        self.velocities = [tf.Variable(tf.zeros_like(v)) for v in variables]

    def apply(self, grads, variables):
        for g, v, w in zip(grads, self.velocities, variables, strict=True):
            update(w, g, v)


def update(w, g, v):
    """One weight's RMSprop update (w and its velocity v on one device)."""
    g = tf.cast(g, w.dtype)
    v.assign(cc.RMS_RHO * v + (1.0 - cc.RMS_RHO) * tf.square(g))
    w.assign_sub(cc.LEARNING_RATE * g * tf.math.rsqrt(v + cc.RMS_EPSILON))


def mirrored_batches(spec: CellSpec, fw: Framework, data: cc.CnnData):
    """A data-parallel cell's batches: each replica's share of the global batch, made on its
    device (the training set preloaded on every device and gathered there, or NumPy rows)."""
    x, y, shards = data.x_train, data.y_train, fw.shards
    order = cc.batch_indices(len(y), data.batch_size, spec.seed)
    devices = fw.strategy.extended.worker_devices
    if spec.data == "device":
        preloaded = []
        for device in devices:                             # copied there once, explicitly
            with tf.device(device):
                preloaded.append((tf.identity(x), tf.identity(y)))

        def gathered(o):
            def share(replica):
                rows = o[replica * shards.per_device:(replica + 1) * shards.per_device]
                return tuple(tf.gather(part, rows.astype(np.int32))
                             for part in preloaded[replica])
            return per_replica(fw.strategy, share)

        return (gathered(o) for o in order), \
            "tensors preloaded on every device, each gathering its share per step"

    def sliced(o):
        return per_replica(fw.strategy, lambda replica: tuple(tf.convert_to_tensor(a[o[
            replica * shards.per_device:(replica + 1) * shards.per_device]]) for a in (x, y)))

    return (sliced(o) for o in order), "NumPy arrays sliced per step, each replica's share " \
        "converted to tensors on its device"


def batches(spec: CellSpec, fw: Framework, data: cc.CnnData):
    """An endless iterator of (images, labels) tensors per the data axis, and what it is."""
    if fw.strategy is not None:
        return mirrored_batches(spec, fw, data)
    x, y = data.x_train, data.y_train
    if spec.data == "dataset":
        dataset = (tf.data.Dataset.from_tensor_slices((x, y))
                   .shuffle(len(y), seed=spec.seed, reshuffle_each_iteration=True)
                   .batch(data.batch_size, drop_remainder=True).repeat()
                   .prefetch(tf.data.AUTOTUNE))
        return iter(dataset), "tf.data: shuffle, batch, repeat, prefetch(AUTOTUNE)"
    if spec.data == "device":
        device = fw.effective["device"]
        with tf.device(device):                            # copied there once, explicitly
            x_dev, y_dev = tf.identity(x), tf.identity(y)

        def epoch_on_device(order: np.ndarray):
            # One copy per epoch; its rows are split off on the device in one operation.
            with tf.device(device):
                return tf.unstack(tf.identity(order.astype(np.int32)))

        indices = cc.device_batches(len(y), data.batch_size, spec.seed, epoch_on_device)
        return ((tf.gather(x_dev, i), tf.gather(y_dev, i)) for i in indices), \
            "tensors preloaded on the device, gathered per step (indices copied once per epoch)"
    order = cc.batch_indices(len(y), data.batch_size, spec.seed)
    return ((tf.convert_to_tensor(x[o]), tf.convert_to_tensor(y[o])) for o in order), \
        "NumPy arrays sliced per step, converted to tensors"


def predict(spec: CellSpec, fw: Framework, data: cc.CnnData, weights: list[np.ndarray]) -> Bench:
    """One forward pass over a batch on the device per call (the jit axis, via fw.compile)."""
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[spec.precision])
    model = Cnn(weights, param_dtype, compute_dtype)
    forward = fw.compile(model.__call__)
    with tf.device(fw.effective["device"]):
        x = tf.constant(cc.predict_batch(spec, data))
    return Bench(step=lambda: forward(x), items_per_step=spec.batch_size, sync=fw.sync,
                 timing=cc.PREDICT_TIMING,
                 effective={"parameter_dtype": param_dtype.name,
                            "compute_dtype": compute_dtype.name},
                 extra=cc.predict_extra(data, weights,
                                        sum(int(np.prod(v.shape)) for v in model.weights)),
                 answer=lambda: cc.predict_answer(forward(x).numpy()))


def build(spec: CellSpec, fw: Framework) -> Bench:
    data = cc.make_data(spec)
    weights = cc.initial_weights(spec.seed)
    if spec.task == "predict":
        return predict(spec, fw, data, weights)
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[spec.precision])
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        model = Cnn(weights, param_dtype, compute_dtype)
        optimizer = RMSprop(model.weights)

    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, model(xb)))
        optimizer.apply(tape.gradient(loss, model.weights), model.weights)
        return loss

    if fw.strategy is not None:
        def replica_loss(xb, yb):
            return tf.nn.compute_average_loss(
                tf.nn.sparse_softmax_cross_entropy_with_logits(yb, model(xb)),
                global_batch_size=spec.batch_size)

        train_step = mirrored_step(fw.strategy, replica_loss, update, model.weights,
                                   optimizer.velocities)

    train_step = fw.compile(train_step)
    forward = tf.function(model.__call__)

    def logits_of(x: np.ndarray) -> np.ndarray:
        return forward(tf.convert_to_tensor(x)).numpy()

    x_probe, y_probe = cc.probe(data)
    initial = cc.initial_extra(logits_of(x_probe), y_probe)
    stream, data_text = batches(spec, fw, data)

    def step() -> Any:
        return train_step(*next(stream))

    extra = cc.base_extra(data, weights, sum(int(np.prod(v.shape)) for v in model.weights),
                          initial)
    return Bench(
        drive=cc.stepped_drive(step, extra, data), calls_per_epoch=data.steps_per_epoch,
        items_per_step=spec.batch_size, sync=fw.sync, loss=lambda out: float(out),
        evaluate=lambda: cc.evaluation(logits_of, data),
        timing="one training step (next batch, GradientTape forward and backward, RMSprop "
               "update)",
        effective={
            "parameter_dtype": param_dtype.name,
            "compute_dtype": compute_dtype.name,
            "loss_scaling": None,
            "data": data_text,
            "optimizer": f"RMSprop by hand (lr={cc.LEARNING_RATE}, rho={cc.RMS_RHO}, eps={cc.RMS_EPSILON})",
        },
        extra=extra, **cc.answer_fields(spec, initial, native_loop=True))
