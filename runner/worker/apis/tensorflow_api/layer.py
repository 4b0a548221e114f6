"""The layer workload on native TensorFlow (no Keras): each layer's twin as a function of its
tf.Variables and inputs written with TensorFlow's own ops — tf.tensordot and tf.einsum,
tf.nn.convolution, depthwise_conv2d, conv2d_transpose, max_pool2d, avg_pool2d, moments,
embedding_lookup, softmax, dropout, and tf.scan for LSTM and GRU — on the recipe's seeded
Keras-layout weights (which are TensorFlow's layout). The jit axis wraps the whole phase in
tf.function (true: with jit_compile; false: eager); the train step is a GradientTape and an SGD
update (assign_sub) of each variable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from ...bench import Bench
from ...protocol import CellSpec
from .. import layer_common as lc
from . import DTYPES, Framework

Weights = dict[str, Any]           # name → tf.Variable
Apply = Callable[[Weights, list[Any], bool], Any]


class Twin(NamedTuple):
    apply: Apply                   # (variables, inputs, training) → output
    kind: str


def dense(w: Weights, x: Any) -> Any:
    return tf.tensordot(x, w["kernel"], 1) + w["bias"]


def conv(a: dict[str, Any]) -> Apply:
    padding = "SAME" if a.get("padding") == "same" else "VALID"
    return lambda w, xs, training: tf.nn.convolution(xs[0], w["kernel"], padding=padding) \
        + w["bias"]


def transposed(a: dict[str, Any]) -> Apply:
    stride = a.get("strides", 1)

    def apply(w: Weights, xs: list[Any], training: bool) -> Any:
        x, (kh, kw, filters, _) = xs[0], w["kernel"].shape
        shape = tf.shape(x)
        out = tf.stack([shape[0], (shape[1] - 1) * stride + kh, (shape[2] - 1) * stride + kw,
                        filters])
        return tf.nn.conv2d_transpose(x, w["kernel"], out, stride, padding="VALID") + w["bias"]
    return apply


def batch_norm(w: Weights, xs: list[Any], training: bool) -> Any:
    x = xs[0]
    if training:
        mean, variance = tf.nn.moments(x, axes=list(range(len(x.shape) - 1)))
        for moving, value in ((w["moving_mean"], mean), (w["moving_variance"], variance)):
            moving.assign(moving * 0.99 + tf.cast(value, moving.dtype) * 0.01)   # Keras's momentum
    else:
        mean, variance = w["moving_mean"], w["moving_variance"]
    return tf.nn.batch_normalization(x, mean, variance, w["beta"], w["gamma"], 1e-3)


def layer_norm(w: Weights, xs: list[Any], training: bool) -> Any:
    mean, variance = tf.nn.moments(xs[0], axes=[-1], keepdims=True)
    return tf.nn.batch_normalization(xs[0], mean, variance, w["beta"], w["gamma"], 1e-3)


def group_norm(groups: int) -> Apply:
    def apply(w: Weights, xs: list[Any], training: bool) -> Any:
        x = xs[0]
        shape = tf.shape(x)
        grouped = tf.reshape(x, tf.concat([shape[:-1], [groups, x.shape[-1] // groups]], 0))
        axes = list(range(1, len(x.shape) - 1)) + [len(x.shape)]
        mean, variance = tf.nn.moments(grouped, axes=axes, keepdims=True)
        normal = tf.reshape((grouped - mean) * tf.math.rsqrt(variance + 1e-3), shape)
        return normal * w["gamma"] + w["beta"]
    return apply


def rms_norm(epsilon: float) -> Apply:
    return lambda w, xs, training: xs[0] * tf.math.rsqrt(
        tf.reduce_mean(tf.square(xs[0]), axis=-1, keepdims=True) + epsilon) * w["scale"]


def attention(causal: bool) -> Apply:
    """Keras's multi-head and grouped-query attention: per-head projections, the query scaled
    by 1/√head_dim, softmax over the keys, each key/value head serving its group of queries."""
    def apply(w: Weights, xs: list[Any], training: bool) -> Any:
        query, value = xs[0], xs[-1]
        q = tf.einsum("btd,dnh->btnh", query, w["query_kernel"]) + w["query_bias"]
        k = tf.einsum("bsd,dnh->bsnh", value, w["key_kernel"]) + w["key_bias"]
        v = tf.einsum("bsd,dnh->bsnh", value, w["value_kernel"]) + w["value_bias"]
        repeats = q.shape[2] // k.shape[2]
        if repeats > 1:
            k, v = tf.repeat(k, repeats, axis=2), tf.repeat(v, repeats, axis=2)
        scores = tf.einsum("btnh,bsnh->bnts", q * tf.math.rsqrt(tf.cast(q.shape[-1], q.dtype)), k)
        if causal:
            steps = tf.shape(scores)[-1]
            mask = tf.linalg.band_part(tf.ones((steps, steps), tf.bool), -1, 0)
            scores = tf.where(mask, scores, tf.constant(-1e9, scores.dtype))
        out = tf.einsum("bnts,bsnh->btnh", tf.nn.softmax(scores, axis=-1), v)
        return tf.einsum("btnh,nhd->btd", out, w["output_kernel"]) + w["output_bias"]
    return apply


def lstm(w: Weights, xs: list[Any], training: bool) -> Any:
    inputs = tf.einsum("btc,cg->tbg", xs[0], w["kernel"]) + w["bias"]      # gates i, f, c, o
    zero = tf.zeros([tf.shape(xs[0])[0], w["recurrent_kernel"].shape[0]], xs[0].dtype)

    def step(carry: Any, z: Any) -> Any:
        h, c = carry
        i, f, g, o = tf.split(z + tf.matmul(h, w["recurrent_kernel"]), 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    h, _ = tf.scan(step, inputs, initializer=(zero, zero))
    return h[-1]


def gru(w: Weights, xs: list[Any], training: bool) -> Any:
    """Keras's GRU (reset_after=True): gates z, r, h, an input and a recurrent bias."""
    inputs = tf.einsum("btc,cg->tbg", xs[0], w["kernel"]) + w["bias"][0]
    zero = tf.zeros([tf.shape(xs[0])[0], w["recurrent_kernel"].shape[0]], xs[0].dtype)

    def step(h: Any, z: Any) -> Any:
        x_z, x_r, x_h = tf.split(z, 3, axis=-1)
        h_z, h_r, h_h = tf.split(tf.matmul(h, w["recurrent_kernel"]) + w["bias"][1], 3, axis=-1)
        update, reset = tf.sigmoid(x_z + h_z), tf.sigmoid(x_r + h_r)
        return update * h + (1 - update) * tf.tanh(x_h + reset * h_h)

    return tf.scan(step, inputs, initializer=zero)[-1]


def rotary(max_wavelength: float) -> Apply:
    """keras-hub's RotaryEmbedding (halves rotated, frequencies computed per call)."""
    def apply(w: Weights, xs: list[Any], training: bool) -> Any:
        x = xs[0]
        dim = x.shape[-1]
        inverse = 1.0 / max_wavelength ** (tf.range(0, dim, 2, dtype=tf.float32) / dim)
        freq = tf.einsum("i,j->ij", tf.cast(tf.range(tf.shape(x)[1]), tf.float32), inverse)
        angles = tf.concat([freq, freq], axis=-1)[None, :, None, :]
        first, second = tf.split(x, 2, axis=-1)
        return x * tf.cast(tf.cos(angles), x.dtype) \
            + tf.concat([-second, first], axis=-1) * tf.cast(tf.sin(angles), x.dtype)
    return apply


def on(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Apply]:
    """A layer without weights: a function of its inputs."""
    return lambda a: (lambda w, xs, training: fn(*xs))


def upsample(a: dict[str, Any]) -> Apply:
    size = a["size"]
    return lambda w, xs, training: tf.repeat(tf.repeat(xs[0], size, axis=1), size, axis=2)


def dropout(a: dict[str, Any]) -> Apply:
    return lambda w, xs, training: tf.nn.dropout(xs[0], a["rate"]) if training else xs[0]


def pool(kind: Callable[..., Any]) -> Callable[[dict[str, Any]], Apply]:
    return lambda a: (lambda w, xs, training: kind(xs[0], a["pool_size"], a["pool_size"], "VALID"))


TWINS: dict[str, Callable[[dict[str, Any]], Apply]] = {
    "Dense": lambda a: (lambda w, xs, training: dense(w, xs[0])),
    "EinsumDense": lambda a: (lambda w, xs, training: tf.einsum(a["equation"], xs[0], w["kernel"])
                              + w["bias"]),
    "Embedding": lambda a: (lambda w, xs, training: tf.nn.embedding_lookup(w["embeddings"], xs[0])),
    "Conv1D": conv, "Conv2D": conv, "Conv3D": conv,
    "DepthwiseConv2D": lambda a: (lambda w, xs, training: tf.nn.depthwise_conv2d(
        xs[0], w["depthwise_kernel"], [1, 1, 1, 1], "VALID") + w["bias"]),
    "Conv2DTranspose": transposed,
    "MaxPooling2D": pool(tf.nn.max_pool2d), "AveragePooling2D": pool(tf.nn.avg_pool2d),
    "BatchNormalization": lambda a: batch_norm, "LayerNormalization": lambda a: layer_norm,
    "GroupNormalization": lambda a: group_norm(a["groups"]),
    "MultiHeadAttention": lambda a: attention(False), "GroupQueryAttention": lambda a: attention(False),
    "CausalSelfAttention": lambda a: attention(True),
    "LSTM": lambda a: lstm, "GRU": lambda a: gru,
    "Add": on(tf.add), "Concatenate": on(lambda x, y: tf.concat([x, y], axis=-1)),
    "Flatten": on(lambda x: tf.reshape(x, [tf.shape(x)[0], -1])),
    "UpSampling2D": upsample, "Dropout": dropout,
    "ReLU": on(tf.nn.relu), "Softmax": on(lambda x: tf.nn.softmax(x, axis=-1)),
    "RMSNormalization": lambda a: rms_norm(a["epsilon"]),
    "RotaryEmbedding": lambda a: rotary(a["max_wavelength"]),
    "SwiGLUFeedForward": lambda a: (lambda w, xs, training: tf.tensordot(
        tf.nn.silu(tf.tensordot(xs[0], w["gate_kernel"], 1))
        * tf.tensordot(xs[0], w["up_kernel"], 1), w["down_kernel"], 1)),
}


def build(spec: CellSpec, fw: Framework) -> Bench:
    layer, weights = lc.layer_of(spec), lc.initial_weights(spec)
    apply = TWINS[layer.name](lc.arguments(spec))
    dtype = DTYPES[spec.precision]
    names = lc.trainable(weights)
    with tf.device(fw.effective["device"]):
        variables = {name: tf.Variable(tf.cast(value, dtype), trainable=name in names, name=name)
                     for name, value in weights.items()}
        xs = [tf.constant(x) if x.dtype == np.int32 else tf.cast(tf.constant(x), dtype)
              for x in lc.inputs(spec)]
    trained = [variables[name] for name in names]
    facts = lc.facts(spec, weights, "tf ops + tf.Variable")
    effective = {"parameter_dtype": dtype.name, "layout": "channels-last"}
    if spec.task == "forward":
        forward = fw.compile(lambda *xs: apply(variables, list(xs), False))
        return Bench(step=lambda: forward(*xs), items_per_step=spec.batch_size, sync=fw.sync,
                     timing=lc.FORWARD_TIMING, effective=effective, extra=facts,
                     answer=lambda: lc.forward_answer(tf.cast(forward(*xs), tf.float32).numpy()))
    target = tf.cast(lc.target(spec, apply(variables, xs, False).shape), dtype)

    def loss_of(xs: list[Any]) -> Any:
        return tf.reduce_mean(tf.square(apply(variables, xs, True) - target))

    if spec.task == "backward":
        floats = [x for x in xs if x.dtype.is_floating]

        def gradients(*xs: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch([x for x in xs if x.dtype.is_floating])
                loss = loss_of(list(xs))
            return tape.gradient(loss, [*trained, *[x for x in xs if x.dtype.is_floating]])

        gradient = fw.compile(gradients)

        def backward_answer() -> dict[str, Any]:
            grads = [tf.cast(tf.convert_to_tensor(g), tf.float32).numpy() for g in gradient(*xs)]
            return lc.backward_answer(grads[:len(trained)], grads[len(trained):])

        return Bench(step=lambda: gradient(*xs), items_per_step=spec.batch_size, sync=fw.sync,
                     timing=lc.BACKWARD_TIMING, effective={**effective, "inputs": len(floats)},
                     extra=facts, answer=None if lc.random_answer(spec) else backward_answer)
    return train_bench(spec, fw, loss_of, variables, trained, weights, xs, effective, facts)


def train_bench(spec: CellSpec, fw: Framework, loss_of: Callable[[list[Any]], Any],
                variables: Weights, trained: list[Any], weights: dict[str, np.ndarray],
                xs: list[Any], effective: dict[str, Any], facts: dict[str, Any]) -> Bench:
    def train_step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_of(list(xs))
        for variable, grad in zip(trained, tape.gradient(loss, trained), strict=True):
            if isinstance(grad, tf.IndexedSlices):     # an embedding's rows: a sparse update
                variable.scatter_sub(tf.IndexedSlices(lc.LEARNING_RATE * grad.values,
                                                      grad.indices, grad.dense_shape))
            else:
                variable.assign_sub(lc.LEARNING_RATE * grad)
        return loss

    step_fn = fw.compile(train_step)

    def train() -> float:
        return float(step_fn(*xs))          # read back, as train_on_batch does

    def answer() -> dict[str, Any]:
        for name, value in weights.items():
            variables[name].assign(tf.cast(value, variables[name].dtype))
        before = [tf.cast(v, tf.float32).numpy() for v in trained]
        loss = train()
        return lc.train_answer(loss, before, [tf.cast(v, tf.float32).numpy() for v in trained])

    return Bench(step=train, items_per_step=spec.batch_size, returns_to_host=True, loss=float,
                 timing=lc.TRAIN_TIMING, effective={**effective, "optimizer": "assign_sub"},
                 extra=facts, answer=answer)
