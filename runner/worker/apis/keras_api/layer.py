"""The layer workload on Keras 3 (any backend): apis/layer_keras.py, with what differs by
backend — the predict function's call (JAX's takes and returns the model's state) and the
backend's own autograd for the backward phase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...bench import Bench
from ...protocol import CellSpec
from .. import layer_common as lc
from ..kerashub import benches as hub_benches
from ..layer_keras import layer_bench, output_shape, structure
from . import Framework

FORWARD = ("the model's predict function on the batch on the device: predict_on_batch without "
           "its copy of the outputs to the host")


def forward(model: Any, x: Any) -> tuple[Callable[[], Any], str]:
    """One call of the compiled predict function on the device-resident batch, as
    predict_on_batch makes it on each backend, less the outputs' copy to the host."""
    import keras

    x = hub_benches.on_device(x)
    model.make_predict_function()
    if keras.backend.backend() != "jax":
        return (lambda: model.predict_function([(x,)])), FORWARD

    def jax_step() -> Any:
        # The JAX trainer's predict_on_batch: the state in, the predict function (which donates
        # it), the state back into the variables.
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                     metrics_variables=False, purge_model_variables=False)
        model._jax_state_synced = False
        outputs, (trainable, non_trainable) = model.predict_function(state, iter([(x,)]))
        model._jax_state = {"trainable_variables": trainable,
                            "non_trainable_variables": non_trainable}
        model.jax_state_sync()
        return outputs

    return jax_step, FORWARD


def torch_autograd(keras: Any, model: Any, arrays: list[np.ndarray], floats: list[int],
                   spec: CellSpec) -> tuple[Callable[..., Any], list[Any]]:
    import torch

    xs = [keras.ops.convert_to_tensor(x, model.compute_dtype if i in floats else None)
          for i, x in enumerate(arrays)]
    for i in floats:
        xs[i].requires_grad_(True)
    target = keras.ops.convert_to_tensor(lc.target(spec, output_shape(model, xs)),
                                         model.compute_dtype)
    weights = [v.value for v in model.trainable_variables]

    def gradients(*xs: Any) -> Any:
        loss = torch.mean((model(structure(list(xs)), training=True) - target) ** 2)
        return torch.autograd.grad(loss, [*weights, *[xs[i] for i in floats]])

    return gradients, xs


def gradient_tape(keras: Any, model: Any, arrays: list[np.ndarray], floats: list[int],
                  spec: CellSpec) -> tuple[Callable[..., Any], list[Any]]:
    """TensorFlow's GradientTape (Keras 3 on TensorFlow, and Keras 2: tf_keras_api/layer.py)."""
    import tensorflow as tf

    dtype = tf.as_dtype(model.compute_dtype)
    xs = [tf.constant(x) if i not in floats else tf.cast(tf.constant(x), dtype)
          for i, x in enumerate(arrays)]
    target = tf.cast(lc.target(spec, output_shape(model, xs)), dtype)

    def gradients(*xs: Any) -> Any:
        chosen = [xs[i] for i in floats]
        with tf.GradientTape() as tape:
            tape.watch(chosen)
            loss = tf.reduce_mean(tf.square(model(structure(list(xs)), training=True) - target))
        return tape.gradient(loss, [*model.trainable_variables, *chosen])

    return gradients, xs


def jax_grad(keras: Any, model: Any, arrays: list[np.ndarray], floats: list[int],
             spec: CellSpec) -> tuple[Callable[..., Any], list[Any]]:
    """jax.grad of the model's stateless call."""
    import jax
    import jax.numpy as jnp

    xs = [jnp.asarray(x) if i not in floats else jnp.asarray(x, model.compute_dtype)
          for i, x in enumerate(arrays)]
    target = jnp.asarray(lc.target(spec, output_shape(model, xs)), model.compute_dtype)
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss(weights: Any, chosen: list[Any], xs: list[Any]) -> Any:
        full = list(xs)
        for i, x in zip(floats, chosen, strict=True):
            full[i] = x
        out, _ = model.stateless_call(weights, non_trainable, structure(full), training=True)
        return jnp.mean((out - target) ** 2)

    def gradients(weights: Any, *xs: Any) -> Any:
        of_weights, of_inputs = jax.grad(loss, argnums=(0, 1))(
            weights, [xs[i] for i in floats], list(xs))
        return [*of_weights, *of_inputs]

    return gradients, [trainable, *xs]


BACKWARDS = {"torch": torch_autograd, "tensorflow": gradient_tape, "jax": jax_grad}


def build(spec: CellSpec, fw: Framework) -> Bench:
    backend = fw.keras.backend.backend()
    return layer_bench(spec, fw, fw.keras, forward, BACKWARDS[backend])
