"""The CNN on native TensorFlow, an adapter to the recipe (apis/cnn_recipe.py): a tf.Module of
tf.Variables and tf.nn ops, a train step with GradientTape under tf.function (jit_compile from the
jit axis, via fw.compile), RMSprop written out on the variables (no Keras in this API), and for a
data-parallel cell a step over MirroredStrategy's replicas. Variables and optimizer state in the
parameter dtype, forward and backward in the compute dtype (variables cast on read), the loss in
float32; mixed_float16 without loss scaling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ...bench import Bench
from ...protocol import CellSpec
from .. import cnn_common as cc, cnn_recipe as recipe, feeds
from ..data_parallel import feeds as dp_feeds
from ..data_parallel.tf_mirrored import mirrored_step
from . import Framework

DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}
OPTIMIZER = f"RMSprop by hand (lr={cc.LEARNING_RATE}, rho={cc.RMS_RHO}, eps={cc.RMS_EPSILON})"


def build(spec: CellSpec, fw: Framework) -> Bench:
    return recipe.build(spec, fw, predictor, trainer)


class Cnn(tf.Module):
    def __init__(self, spec: CellSpec, weights: list[np.ndarray]) -> None:
        super().__init__(name="cnn")
        self.param_dtype, self.compute_dtype = recipe.precision_dtypes(spec, DTYPES)
        self.weights = [tf.Variable(tf.cast(w, self.param_dtype)) for w in weights]

    def __call__(self, x: Any) -> Any:
        w = [tf.cast(v, self.compute_dtype) for v in self.weights]
        x = tf.cast(x, self.compute_dtype)
        for index in range(len(cc.CONV_FILTERS)):
            x = tf.nn.relu(tf.nn.conv2d(x, w[2 * index], 1, "SAME") + w[2 * index + 1])
            x = tf.nn.max_pool2d(x, 2, 2, "VALID") if index % 2 == 1 else x
        x = tf.nn.relu(tf.reshape(x, (-1, cc.FLAT)) @ w[-4] + w[-3])   # height, width, channel
        return tf.cast(x @ w[-2] + w[-1], tf.float32)

    def parameters(self) -> int:
        return sum(int(np.prod(v.shape)) for v in self.weights)

    @property
    def effective(self) -> dict[str, str]:
        """A plain dict each time (one kept on a tf.Module would become a tracked wrapper)."""
        return {"parameter_dtype": self.param_dtype.name, "compute_dtype": self.compute_dtype.name}


def update(w: Any, g: Any, v: Any) -> None:
    """One weight's RMSprop update, as tf.keras.optimizers.RMSprop does:
    v ← ρv + (1−ρ)g²;  w ← w − lr·g / √(v + ε)."""
    g = tf.cast(g, w.dtype)
    v.assign(cc.RMS_RHO * v + (1.0 - cc.RMS_RHO) * tf.square(g))
    w.assign_sub(cc.LEARNING_RATE * g * tf.math.rsqrt(v + cc.RMS_EPSILON))


def predictor(spec: CellSpec, fw: Framework, data: cc.CnnData,
              weights: list[np.ndarray]) -> recipe.Predictor:
    cnn = Cnn(spec, weights)
    forward = fw.compile(cnn.__call__)
    with tf.device(fw.effective["device"]):
        x = tf.constant(cc.predict_batch(spec, data))
    return recipe.Predictor(recipe.forward_bench(spec, fw, lambda: forward(x), cnn.effective),
                            cnn.parameters(), to_numpy=lambda out: out.numpy())


def ways(spec: CellSpec, fw: Framework, data: cc.CnnData) -> feeds.Ways:
    """The data axis on TensorFlow (data-parallel: data_parallel/feeds.py)."""
    x, y, device = data.x_train, data.y_train, fw.effective["device"]
    if fw.strategy is not None:
        return dp_feeds.tf_mirrored(fw.strategy, fw.shards, x, y,
                                    cc.batch_indices(len(y), data.batch_size, spec.seed))

    def preloaded() -> feeds.Fed:
        with tf.device(device):                            # copied there once, explicitly
            x_dev, y_dev = tf.identity(x), tf.identity(y)

        def epoch(order: np.ndarray) -> Any:   # one copy per epoch, split on the device at once
            with tf.device(device):
                return tf.unstack(tf.identity(order.astype(np.int32)))

        return ((tf.gather(x_dev, i), tf.gather(y_dev, i))
                for i in cc.device_batches(len(y), data.batch_size, spec.seed, epoch)), \
            "tensors preloaded on the device, gathered per step (indices copied once per epoch)"

    return feeds.Ways(
        device=preloaded, arrays=lambda: feeds.sliced(
            x, y, cc.batch_indices(len(y), data.batch_size, spec.seed), tf.convert_to_tensor,
            "NumPy arrays sliced per step, converted to tensors"),
        dataset=lambda: (iter(feeds.tf_dataset(x, y, data.batch_size, spec.seed, repeat=True)),
                         feeds.DATASET_TEXT))


def trainer(spec: CellSpec, fw: Framework, data: cc.CnnData,
            weights: list[np.ndarray]) -> recipe.Trainer:
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        cnn = Cnn(spec, weights)
        velocities = [tf.Variable(tf.zeros_like(v)) for v in cnn.weights]

    def train_step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, cnn(xb)))
        for g, v, w in zip(tape.gradient(loss, cnn.weights), velocities, cnn.weights, strict=True):
            update(w, g, v)
        return loss

    if fw.strategy is not None:
        train_step = mirrored_step(fw.strategy, lambda xb, yb: tf.nn.compute_average_loss(
            tf.nn.sparse_softmax_cross_entropy_with_logits(yb, cnn(xb)),
            global_batch_size=spec.batch_size), update, cnn.weights, velocities)
    forward = tf.function(cnn.__call__)
    loop = recipe.native_loop(
        spec, fw, data, fw.compile(train_step), ways(spec, fw, data), loss=float,
        timing="one training step (next batch, GradientTape forward and backward, RMSprop "
               "update)",
        effective={**cnn.effective, "loss_scaling": None, "optimizer": OPTIMIZER})
    return recipe.Trainer(lambda x: forward(tf.convert_to_tensor(x)).numpy(), cnn.parameters(),
                          loop)
