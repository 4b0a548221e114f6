"""The layer workload on Keras, the same code for Keras 3 on every backend and for Keras 2
(tf_keras): the table's layer (catalog/layers.py) in a one-layer functional model on the recipe's
seeded weights (apis/layer_common.py), compiled with SGD, the mean squared error and the jit
axis's jit_compile — the way keras's own layer benchmarks run a layer.

forward: the model's predict function on the batch already on the device — what
`predict_on_batch` runs, without its copy of the outputs to the host (which a native forward
call does not make either), so the two sides of the Keras tax do the same work; train:
`train_on_batch` (kerashub/benches.py fit_bench), its loss read back each call, as the native
twins read theirs; backward (Keras has no call for it): the model called in training mode under
its backend's own autograd — torch.autograd.grad, a GradientTape, jax.grad of its stateless
call — for the gradients of the loss with respect to its weights and inputs, compiled by that
backend's compiler where the jit axis asks (as the native twin's phase is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..bench import Bench
from ..catalog.layers import Layer
from ..protocol import CellSpec
from . import KerasFramework
from . import layer_common as lc
from .kerashub import benches as hub_benches

# A Keras generation's forward step (model, batch) → (one call, what it runs), and its backward
# (keras, model, inputs, float inputs' indices, spec) → (the gradients' function, its arguments):
# keras_api/layer.py (per backend) and tf_keras_api/layer.py.
Forward = Callable[[Any, Any], tuple[Callable[[], Any], str]]
Backward = Callable[[Any, Any, list[np.ndarray], list[int], CellSpec],
                    tuple[Callable[..., Any], list[Any]]]


def swiglu_class(keras: Any) -> type:
    """The SwiGLU feed-forward of LLaMA-style models, made of Keras layers (Keras has no class
    for it): down(silu(gate(x)) × up(x)), none with a bias; weights gate, up, down."""

    class SwiGLUFeedForward(keras.layers.Layer):
        # A class attribute, not the closure: Keras 2 converts build with autograph, which
        # loses the enclosing function's names.
        dense = keras.layers.Dense

        def __init__(self, intermediate_dim: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.intermediate_dim = intermediate_dim

        def build(self, input_shape: Any) -> None:
            dense = type(self).dense
            self.gate = dense(self.intermediate_dim, activation="swish", use_bias=False,
                              dtype=self.dtype_policy)
            self.up = dense(self.intermediate_dim, use_bias=False, dtype=self.dtype_policy)
            self.down = dense(input_shape[-1], use_bias=False, dtype=self.dtype_policy)
            self.gate.build(input_shape)
            self.up.build(input_shape)
            self.down.build((*input_shape[:-1], self.intermediate_dim))
            self.built = True

        def call(self, x: Any) -> Any:
            return self.down(self.gate(x) * self.up(x))

    return SwiGLUFeedForward


# Arguments the Keras layer is built with beyond the table's, whose effect the seeded weights
# (set_weights below) undo: the recurrent layers' default orthogonal initializer runs a QR
# decomposition, which neither torch (geqrf) nor JAX nor TensorFlow has in bfloat16.
BUILD_ONLY = {"LSTM": {"recurrent_initializer": "glorot_uniform"},
              "GRU": {"recurrent_initializer": "glorot_uniform"}}


def keras_layer(keras: Any, layer: Layer, args: dict[str, Any]) -> Any:
    """The table's layer as its Keras class (keras.layers, keras-hub's, or the recipe's)."""
    if layer.keras == "recipe":
        return swiglu_class(keras)(**args)
    if layer.keras == "keras_hub.layers":
        import keras_hub

        return getattr(keras_hub.layers, layer.class_name)(**args)
    return getattr(keras.layers, layer.class_name)(**args)


def build_model(keras: Any, spec: CellSpec) -> tuple[Any, Any]:
    """(the one-layer functional model, its layer), the layer on the seeded weights."""
    layer = lc.layer_of(spec)
    shapes = layer.inputs(lc.shapes_of(spec))
    inputs = [keras.Input(shape=shape, dtype="int32" if layer.ids else "float32")
              for shape in shapes]
    made = keras_layer(keras, layer, {**lc.arguments(spec), **BUILD_ONLY.get(layer.name, {})})
    if layer.inputs_as == "list":
        out = made(inputs, **layer.call)
    else:
        out = made(*[inputs[i] for i in (layer.call_inputs or range(len(inputs)))], **layer.call)
    model = keras.Model(inputs, out)
    weights = lc.initial_weights(spec)
    if weights:
        made.set_weights(list(weights.values()))
    return model, made


def batch(spec: CellSpec) -> tuple[Any, ...] | Any:
    """The inputs as a functional model takes them: one array, or a tuple (a list would be
    stacked into one tensor by Keras 2's tf.data)."""
    xs = lc.inputs(spec)
    return xs[0] if len(xs) == 1 else tuple(xs)


def to_numpy(value: Any) -> np.ndarray:
    value = value[0] if isinstance(value, (list, tuple)) else value
    if type(value).__name__ == "IndexedSlices":     # TensorFlow's gradient of an embedding
        import tensorflow as tf

        value = tf.convert_to_tensor(value)
    if type(value).__module__.startswith("torch"):  # a torch tensor (its own dtypes, device)
        value = value.detach().float().cpu()
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, np.float32)


def layer_bench(spec: CellSpec, fw: KerasFramework, keras: Any, forward: Forward,
                backward: Backward) -> Bench:
    """The cell's bench: the phase its task names."""
    model, made = build_model(keras, spec)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lc.LEARNING_RATE), loss="mse",
                  jit_compile=fw.jit_compile())
    x = batch(spec)
    weights = lc.initial_weights(spec)
    layer = lc.layer_of(spec)
    facts = {**lc.facts(spec, weights, f"{layer.keras}.{layer.class_name}"),
             "keras_parameters": int(model.count_params())}
    effective = {"jit_compile": hub_benches.jit_in_effect(model),
                 "compute_dtype": made.compute_dtype, "variable_dtype": made.variable_dtype}
    if spec.task == "backward":
        return backward_bench(spec, fw, keras, model, backward, effective, facts)
    if spec.task == "forward":
        step, feed = forward(model, x)
        return Bench(step=step, items_per_step=spec.batch_size, sync=fw.sync,
                     timing=lc.FORWARD_TIMING, effective={**effective, "forward": feed},
                     extra=facts, answer=lambda: lc.forward_answer(to_numpy(step())))
    # The output's shape from one (untimed) predict call: a declared one may hold None.
    y = lc.target(spec, to_numpy(model.predict_on_batch(x)).shape)
    bench = hub_benches.fit_bench(model, x, y, batch=spec.batch_size, effective=effective,
                                  extra=facts, deterministic=False)
    bench.first_loss_in_answer = False
    bench.extra.pop("answer_note", None)
    bench.timing = lc.TRAIN_TIMING
    trainable = [i for i, name in enumerate(weights) if name in lc.trainable(weights)]

    def answer() -> dict[str, Any]:
        made.set_weights(list(weights.values()))
        before = [made.get_weights()[i] for i in trainable]
        loss = bench.loss(bench.call_step()) if bench.loss else float("nan")
        return lc.train_answer(loss, before, [made.get_weights()[i] for i in trainable])

    bench.answer = answer
    return bench


def backward_bench(spec: CellSpec, fw: KerasFramework, keras: Any, model: Any,
                   backward: Backward, effective: dict[str, Any],
                   facts: dict[str, Any]) -> Bench:
    """The gradients of the loss (mean squared error against the seeded target) with respect
    to the model's trainable weights and its float inputs, by its backend's own autograd."""
    arrays = lc.inputs(spec)
    floats = [i for i, x in enumerate(arrays) if x.dtype != np.int32]
    compiler: Any = getattr(fw, "native", fw)            # Keras 3: its backend's Framework
    gradients, args = backward(keras, model, arrays, floats, spec)
    gradient = compiler.compile(gradients)
    count = len(model.trainable_variables)

    def answer() -> dict[str, Any]:
        grads = [to_numpy(g) for g in gradient(*args)]
        return lc.backward_answer(grads[:count], grads[count:])

    return Bench(step=lambda: gradient(*args), items_per_step=spec.batch_size, sync=fw.sync,
                 timing=lc.BACKWARD_TIMING,
                 effective={**effective, "backward": f"{backward.__name__} over the Keras model"},
                 extra=facts, answer=None if lc.random_answer(spec) else answer)


def structure(xs: list[Any]) -> Any:
    return xs[0] if len(xs) == 1 else tuple(xs)


def output_shape(model: Any, xs: list[Any]) -> tuple[int, ...]:
    return tuple(to_numpy(model(structure(xs), training=False)).shape)
