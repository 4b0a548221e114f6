"""The CNN on Flax (linen) and Optax, an adapter to the recipe (apis/cnn_recipe.py): a pure train
step (value_and_grad, optax update) under jax.jit from the jit axis (fw.compile). Parameters and
optimizer state in the parameter dtype, forward and backward in the compute dtype (Flax's
`dtype`), the loss in float32; mixed_float16 without loss scaling (Optax has none built in).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ...bench import Bench
from ...protocol import CellSpec
from ...tuning import knob
from .. import cnn_common as cc, cnn_recipe as recipe, feeds
from ..data_parallel import feeds as dp_feeds
from . import Framework

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
OPTIMIZER = f"optax.rmsprop(lr={cc.LEARNING_RATE}, decay={cc.RMS_RHO}, eps={cc.RMS_EPSILON})"


def build(spec: CellSpec, fw: Framework) -> Bench:
    return recipe.build(spec, fw, predictor, trainer)


class Cnn(nn.Module):
    dtype: Any = jnp.float32          # compute dtype
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: Any) -> Any:
        typed = {"dtype": self.dtype, "param_dtype": self.param_dtype}
        for index, filters in enumerate(cc.CONV_FILTERS):
            x = nn.relu(nn.Conv(filters, (cc.KERNEL, cc.KERNEL), padding="SAME", **typed)(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2)) if index % 2 == 1 else x
        x = nn.relu(nn.Dense(cc.HIDDEN, **typed)(x.reshape((x.shape[0], -1))))   # HWC, as Keras
        return nn.Dense(cc.CLASSES, **typed)(x).astype(jnp.float32)


def model(spec: CellSpec, weights: list[np.ndarray]) -> tuple[Cnn, Any, dict[str, str]]:
    """The module, its parameters (the shared weights are in Flax's layout already: HWIO
    kernels, (in, out) dense) and the dtypes in effect."""
    param, compute = recipe.precision_dtypes(spec, DTYPES)
    names = [f"Conv_{i}" for i in range(len(cc.CONV_FILTERS))] + ["Dense_0", "Dense_1"]
    params = {"params": {name: {"kernel": jnp.asarray(weights[2 * i], param),
                                "bias": jnp.asarray(weights[2 * i + 1], param)}
                         for i, name in enumerate(names)}}
    return Cnn(dtype=compute, param_dtype=param), params, {
        "parameter_dtype": jnp.dtype(param).name, "compute_dtype": jnp.dtype(compute).name}


def parameters(params: Any) -> int:
    return sum(int(np.prod(p.shape)) for p in jax.tree_util.tree_leaves(params))


def predictor(spec: CellSpec, fw: Framework, data: cc.CnnData,
              weights: list[np.ndarray]) -> recipe.Predictor:
    cnn, params, effective = model(spec, weights)
    params = jax.device_put(params, fw.jax_device)
    forward = fw.compile(cnn.apply)
    x = jax.device_put(cc.predict_batch(spec, data), fw.jax_device)
    return recipe.Predictor(recipe.forward_bench(spec, fw, lambda: forward(params, x), effective),
                            parameters(params))


def ways(spec: CellSpec, fw: Framework, data: cc.CnnData) -> feeds.Ways:
    """The data axis on JAX (data-parallel: data_parallel/feeds.py)."""
    x, y, device = data.x_train, data.y_train, fw.jax_device
    order = cc.batch_indices(len(y), data.batch_size, spec.seed)
    if fw.sharded is not None:
        return dp_feeds.jax_sharded(fw.sharded, x, y, order)

    def preloaded() -> feeds.Fed:
        # Each step's indices put on the device as it starts: JAX's transfers are asynchronous
        # and never wait for queued work (torch's .to() from pageable memory does); splitting an
        # epoch's indices on the device would cost an XLA compilation per epoch length.
        x_dev, y_dev = jax.device_put(x, device), jax.device_put(y, device)
        return ((x_dev[i], y_dev[i]) for i in (jax.device_put(o, device) for o in order)), \
            "arrays preloaded on the device, gathered per step"

    def prefetched() -> feeds.Fed:
        return feeds.prefetched(((x[o], y[o]) for o in order), lambda b: jax.device_put(b, device)), \
            f"NumPy batches put on the device by a background thread, {feeds.PREFETCH} ahead"

    return feeds.Ways(device=preloaded, dataset=prefetched, arrays=lambda: feeds.sliced(
        x, y, order, None, "NumPy arrays sliced per step, copied to the device by the call"))


def trainer(spec: CellSpec, fw: Framework, data: cc.CnnData,
            weights: list[np.ndarray]) -> recipe.Trainer:
    cnn, params, effective = model(spec, weights)
    optimizer = optax.rmsprop(cc.LEARNING_RATE, decay=cc.RMS_RHO, eps=cc.RMS_EPSILON)
    # Committed to the device from the start: the step's outputs are, and a jitted function sees
    # committed and uncommitted inputs as different signatures (a second compilation otherwise).
    state = jax.device_put({"params": params, "opt": optimizer.init(params)},
                           fw.sharded.replicated if fw.sharded is not None else fw.jax_device)

    def loss_of(params: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(cnn.apply(params, xb), yb).mean()

    def train_step(state: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_of)(state["params"], xb, yb)
        updates, opt = optimizer.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt}, loss

    # The tuned tier's `donate`: the old state's buffers hold the new one (it is never read again).
    donated = (0,) if knob(spec, "donate", False) else ()
    compiled, forward = fw.compile(train_step, donate_argnums=donated), jax.jit(cnn.apply)

    def step(xb: Any, yb: Any) -> Any:
        nonlocal state
        state, loss = compiled(state, xb, yb)
        return loss, state              # the clock waits for the update too, not just the loss

    loop = recipe.native_loop(
        spec, fw, data, step, ways(spec, fw, data), loss=lambda out: float(out[0]),
        timing="one training step (next batch, jitted value_and_grad + optax update); the "
               "block's synchronisation is block_until_ready on the loss and new state",
        effective={**effective, "loss_scaling": None, "optimizer": OPTIMIZER})
    return recipe.Trainer(lambda x: np.asarray(forward(state["params"], x)), parameters(params),
                          loop)
