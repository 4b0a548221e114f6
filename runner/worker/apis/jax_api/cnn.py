"""The CNN trained with Flax (linen) and Optax: a pure train step (value_and_grad, optax update)
under jax.jit (the jit axis, via fw.compile), manual shuffling and batching in NumPy.

Precision: parameters and optimizer state stay in the parameter dtype, the forward and backward
passes run in the compute dtype (Flax's `dtype`), the loss is taken in float32; mixed_float16
uses no loss scaling (Optax has none built in).
Data axis: "arrays" slices NumPy arrays per step (copied to the device by the jitted call);
"dataset" is a host pipeline of shuffled NumPy batches that a background thread puts on the
device two batches ahead (like flax.jax_utils.prefetch_to_device); "device" puts the whole
training set on the device once and gathers each batch there.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ...protocol import CellSpec
from ...bench import Bench
from .. import cnn_common as cc
from . import Framework

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
PREFETCH = 2


class Cnn(nn.Module):
    dtype: Any = jnp.float32          # compute dtype
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        for index, filters in enumerate(cc.CONV_FILTERS):
            x = nn.Conv(filters, (cc.KERNEL, cc.KERNEL), padding="SAME", dtype=self.dtype,
                        param_dtype=self.param_dtype)(x)
            x = nn.relu(x)
            if index % 2 == 1:
                x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))                  # height, width, channel order, as Keras
        x = nn.relu(nn.Dense(cc.HIDDEN, dtype=self.dtype, param_dtype=self.param_dtype)(x))
        return nn.Dense(cc.CLASSES, dtype=self.dtype, param_dtype=self.param_dtype)(x)


def flax_params(weights: list[np.ndarray], dtype) -> dict[str, Any]:
    """The shared Keras-layout weights are already Flax's layout (HWIO kernels, (in, out) dense)."""
    names = [f"Conv_{i}" for i in range(len(cc.CONV_FILTERS))] + ["Dense_0", "Dense_1"]
    return {"params": {name: {"kernel": jnp.asarray(weights[2 * i], dtype),
                              "bias": jnp.asarray(weights[2 * i + 1], dtype)}
                       for i, name in enumerate(names)}}


def prefetched(batches, device):
    """Put host batches on the device in a background thread, PREFETCH batches ahead."""
    ready: queue.Queue = queue.Queue(maxsize=PREFETCH)

    def fill():
        for batch in batches:
            ready.put(jax.device_put(batch, device))

    threading.Thread(target=fill, daemon=True).start()
    while True:
        yield ready.get()


def sharded_batches(spec: CellSpec, fw: Framework, data: cc.CnnData):
    """A data-parallel cell's batches: each global batch sharded along the mesh's batch axis
    (the rows on every device, each gathering its share; or NumPy rows put on the devices)."""
    sharded, x, y = fw.sharded, data.x_train, data.y_train
    order = cc.batch_indices(len(y), data.batch_size, spec.seed)
    if spec.data == "device":
        gather = sharded.gather()
        x_dev, y_dev = (jax.device_put(a, sharded.replicated) for a in (x, y))
        indices = (jax.device_put(o, sharded.replicated) for o in order)
        return ((gather(x_dev, i), gather(y_dev, i)) for i in indices), \
            "arrays preloaded on every device, each gathering its share of the batch per step"
    return (jax.device_put((x[o], y[o]), sharded.batch) for o in order), \
        "NumPy arrays sliced per step, put on the devices sharded along the batch"


def batches(spec: CellSpec, fw: Framework, data: cc.CnnData):
    """An endless iterator of (images, labels) per the data axis, and what it is."""
    if fw.sharded is not None:
        return sharded_batches(spec, fw, data)
    x, y = data.x_train, data.y_train
    order = cc.batch_indices(len(y), data.batch_size, spec.seed)
    if spec.data == "device":
        x_dev, y_dev = jax.device_put(x, fw.jax_device), jax.device_put(y, fw.jax_device)
        # Each step's indices are put on the device as it starts: JAX's transfers are
        # asynchronous and never wait for the device's queued work (unlike torch's .to() from
        # pageable memory, which synchronises the stream). Splitting a whole epoch's indices on
        # the device instead costs an XLA compilation of seconds per epoch length.
        return ((x_dev[i], y_dev[i]) for i in (jax.device_put(o, fw.jax_device) for o in order)), \
            "arrays preloaded on the device, gathered per step"
    host = ((x[o], y[o]) for o in order)
    if spec.data == "dataset":
        return prefetched(host, fw.jax_device), \
            f"NumPy batches put on the device by a background thread, {PREFETCH} ahead"
    return host, "NumPy arrays sliced per step, copied to the device by the call"


def predict(spec: CellSpec, fw: Framework, data: cc.CnnData, weights: list[np.ndarray]) -> Bench:
    """One forward pass over a batch on the device per call (the jit axis: jax.jit or not)."""
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[spec.precision])
    model = Cnn(dtype=compute_dtype, param_dtype=param_dtype)
    params = jax.device_put(flax_params(weights, param_dtype), fw.jax_device)
    forward = fw.compile(lambda params, x: model.apply(params, x).astype(jnp.float32))
    x = jax.device_put(cc.predict_batch(spec, data), fw.jax_device)
    parameters = sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params))
    return Bench(step=lambda: forward(params, x), items_per_step=spec.batch_size, sync=fw.sync,
                 timing=cc.PREDICT_TIMING,
                 effective={"parameter_dtype": jnp.dtype(param_dtype).name,
                            "compute_dtype": jnp.dtype(compute_dtype).name},
                 extra=cc.predict_extra(data, weights, parameters),
                 answer=lambda: cc.predict_answer(np.asarray(forward(params, x))))


def build(spec: CellSpec, fw: Framework) -> Bench:
    data = cc.make_data(spec)
    weights = cc.initial_weights(spec.seed)
    if spec.task == "predict":
        return predict(spec, fw, data, weights)
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[spec.precision])
    model = Cnn(dtype=compute_dtype, param_dtype=param_dtype)
    params = flax_params(weights, param_dtype)
    optimizer = optax.rmsprop(cc.LEARNING_RATE, decay=cc.RMS_RHO, eps=cc.RMS_EPSILON)
    # Committed to the device from the start: the step's outputs are, and a jitted function sees
    # committed and uncommitted inputs as different signatures (a second compilation otherwise).
    state = jax.device_put({"params": params, "opt": optimizer.init(params)},
                           fw.sharded.replicated if fw.sharded is not None else fw.jax_device)

    def loss_fn(params, xb, yb):
        logits = model.apply(params, xb).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    def train_step(state, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], xb, yb)
        updates, opt = optimizer.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt}, loss

    train_step = fw.compile(train_step)
    forward = jax.jit(lambda params, x: model.apply(params, x).astype(jnp.float32))

    def logits_of(x: np.ndarray) -> np.ndarray:
        return np.asarray(forward(state["params"], x))

    x_probe, y_probe = cc.probe(data)
    initial = cc.initial_extra(logits_of(x_probe), y_probe)
    stream, data_text = batches(spec, fw, data)

    def step() -> Any:
        nonlocal state
        xb, yb = next(stream)
        state, loss = train_step(state, xb, yb)
        return loss, state              # the clock waits for the update too, not just the loss

    parameters = sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params))
    extra = cc.base_extra(data, weights, parameters, initial)
    return Bench(
        drive=cc.stepped_drive(step, extra, data), calls_per_epoch=data.steps_per_epoch,
        items_per_step=spec.batch_size, sync=fw.sync, loss=lambda out: float(out[0]),
        evaluate=lambda: cc.evaluation(logits_of, data),
        timing="one training step (next batch, jitted value_and_grad + optax update); the "
               "block's synchronisation is block_until_ready on the loss and new state",
        effective={
            "parameter_dtype": jnp.dtype(param_dtype).name,
            "compute_dtype": jnp.dtype(compute_dtype).name,
            "loss_scaling": None,
            "data": data_text,
            "optimizer": f"optax.rmsprop(lr={cc.LEARNING_RATE}, decay={cc.RMS_RHO}, eps={cc.RMS_EPSILON})",
        },
        extra=extra, **cc.answer_fields(spec, initial, native_loop=True))
