"""The layer workload, written once for every API: which layer and shapes a cell runs
(catalog/layers.py, its one table), its seeded weights in Keras's layout and order, its seeded
inputs and loss target, the phases' timing texts, and the answers. Standard library and NumPy.

The weights are made here from the seed, in NumPy, once, and loaded into the Keras layer
(`set_weights`) and into every native twin (each in its own layout): so the same-answer check
compares Keras's layer with the twin on identical numbers. Kernels are uniform within Glorot's
limit; biases, norms' offsets and moving statistics are small random numbers rather than
Keras's zeros and ones, so a twin that drops or misplaces one computes a different answer.

Phases (the task axis): `forward` is the layer's inference call (Keras: its model's predict
function; BatchNormalization on its moving statistics, Dropout an identity); `train` one
training step, forward in training mode, the mean squared error against a seeded target, the
gradients and one plain SGD update (learning rate LEARNING_RATE; no momentum, so nothing but the
weights carries over between steps), its loss read back to the host each call as Keras's
train_on_batch does; `backward` the gradients of that loss with respect to the weights and the
inputs, without an update.

Answers: forward, the norms and the first values of the output (in Keras's channels-last
layout); train, the first step's loss and the norms of its update of the trainable weights (made
again from the initial weights after the timed loop); backward, the norms of the weights'
gradients and of the inputs'. Norms of every weight together do not depend on a layout or an
order, so a transposed kernel or a split bias still compares.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..catalog.layers import LAYERS, Layer
from ..protocol import CellSpec
from . import answers

LEARNING_RATE = 0.01
OPTIMIZER = f"SGD(learning_rate={LEARNING_RATE}), no momentum"
LOSS = "mean squared error against a seeded target of the output's shape"
FORWARD_TIMING = "one forward call of the layer in inference mode on a batch on the device"
TRAIN_TIMING = ("one training step (forward in training mode, " + LOSS + ", gradients, one "
                f"{OPTIMIZER} update), its loss read back to the host as train_on_batch does")
BACKWARD_TIMING = ("the gradients of the loss (" + LOSS + ") with respect to the weights and the "
                   "inputs, no update")
TIMINGS = {"forward": FORWARD_TIMING, "train": TRAIN_TIMING, "backward": BACKWARD_TIMING}


def layer_of(spec: CellSpec) -> Layer:
    return LAYERS[str(spec.options["layer"])]


def shapes_of(spec: CellSpec) -> str:
    return str(spec.options.get("shapes", "small"))


def arguments(spec: CellSpec) -> dict[str, Any]:
    return layer_of(spec).arguments(shapes_of(spec))


def input_shapes(spec: CellSpec) -> list[tuple[int, ...]]:
    """Each input's shape with the batch axis first."""
    return [(spec.batch_size, *shape) for shape in layer_of(spec).inputs(shapes_of(spec))]


# --- the weights: Keras's order and layout, made from the seed ------------------------------------

def _kernel_size(args: dict[str, Any], rank: int) -> tuple[int, ...]:
    size = args["kernel_size"]
    return tuple(size) if isinstance(size, (list, tuple)) else (size,) * rank


def _attention(args: dict[str, Any], query: int, value: int) -> list[tuple[str, tuple, str]]:
    heads, key_dim = args["num_heads"], args["key_dim"]
    return [("query_kernel", (query, heads, key_dim), "kernel"), ("query_bias", (heads, key_dim), "bias"),
            ("key_kernel", (value, heads, key_dim), "kernel"), ("key_bias", (heads, key_dim), "bias"),
            ("value_kernel", (value, heads, key_dim), "kernel"),
            ("value_bias", (heads, key_dim), "bias"),
            ("output_kernel", (heads, key_dim, query), "kernel"), ("output_bias", (query,), "bias")]


def _gqa(args: dict[str, Any], query: int, value: int) -> list[tuple[str, tuple, str]]:
    q, kv, dim = args["num_query_heads"], args["num_key_value_heads"], args["head_dim"]
    return [("query_kernel", (query, q, dim), "kernel"), ("query_bias", (q, dim), "bias"),
            ("key_kernel", (value, kv, dim), "kernel"), ("key_bias", (kv, dim), "bias"),
            ("value_kernel", (value, kv, dim), "kernel"), ("value_bias", (kv, dim), "bias"),
            ("output_kernel", (q, dim, query), "kernel"), ("output_bias", (query,), "bias")]


def _conv(args: dict[str, Any], channels: int, rank: int) -> list[tuple[str, tuple, str]]:
    filters = args["filters"]
    return [("kernel", (*_kernel_size(args, rank), channels, filters), "kernel"),
            ("bias", (filters,), "bias")]


def _norm(channels: int) -> list[tuple[str, tuple, str]]:
    return [("gamma", (channels,), "gamma"), ("beta", (channels,), "bias")]


# Layer → (arguments, per-sample input shapes) → [(name, shape, kind)] in Keras's weight order.
WEIGHTS: dict[str, Callable[[dict[str, Any], list[tuple[int, ...]]],
                            list[tuple[str, tuple, str]]]] = {
    "Dense": lambda a, s: [("kernel", (s[0][-1], a["units"]), "kernel"),
                           ("bias", (a["units"],), "bias")],
    "EinsumDense": lambda a, s: [("kernel", (s[0][-1], a["output_shape"][-1]), "kernel"),
                                 ("bias", (a["output_shape"][-1],), "bias")],
    "Embedding": lambda a, s: [("embeddings", (a["input_dim"], a["output_dim"]), "embedding")],
    "Conv1D": lambda a, s: _conv(a, s[0][-1], 1),
    "Conv2D": lambda a, s: _conv(a, s[0][-1], 2),
    "Conv3D": lambda a, s: _conv(a, s[0][-1], 3),
    "DepthwiseConv2D": lambda a, s: [
        ("depthwise_kernel", (*_kernel_size(a, 2), s[0][-1], a["depth_multiplier"]), "kernel"),
        ("bias", (s[0][-1] * a["depth_multiplier"],), "bias")],
    "Conv2DTranspose": lambda a, s: [
        ("kernel", (*_kernel_size(a, 2), a["filters"], s[0][-1]), "kernel"),
        ("bias", (a["filters"],), "bias")],
    "BatchNormalization": lambda a, s: _norm(s[0][-1]) + [
        ("moving_mean", (s[0][-1],), "bias"), ("moving_variance", (s[0][-1],), "variance")],
    "LayerNormalization": lambda a, s: _norm(s[0][-1]),
    "GroupNormalization": lambda a, s: _norm(s[0][-1]),
    "MultiHeadAttention": lambda a, s: _attention(a, s[0][-1], s[-1][-1]),
    "CausalSelfAttention": lambda a, s: _attention(a, s[0][-1], s[0][-1]),
    "GroupQueryAttention": lambda a, s: _gqa(a, s[0][-1], s[-1][-1]),
    "LSTM": lambda a, s: [("kernel", (s[0][-1], 4 * a["units"]), "kernel"),
                          ("recurrent_kernel", (a["units"], 4 * a["units"]), "kernel"),
                          ("bias", (4 * a["units"],), "bias")],
    "GRU": lambda a, s: [("kernel", (s[0][-1], 3 * a["units"]), "kernel"),
                         ("recurrent_kernel", (a["units"], 3 * a["units"]), "kernel"),
                         ("bias", (2, 3 * a["units"]), "bias")],
    "RMSNormalization": lambda a, s: [("scale", (s[0][-1],), "gamma")],
    "SwiGLUFeedForward": lambda a, s: [
        ("gate_kernel", (s[0][-1], a["intermediate_dim"]), "kernel"),
        ("up_kernel", (s[0][-1], a["intermediate_dim"]), "kernel"),
        ("down_kernel", (a["intermediate_dim"], s[0][-1]), "kernel")],
}


def weight_specs(spec: CellSpec) -> list[tuple[str, tuple, str]]:
    """[(name, shape, kind)] of the cell's layer, in Keras's order ([] for a layer without)."""
    made = WEIGHTS.get(layer_of(spec).name)
    return made(arguments(spec), list(layer_of(spec).inputs(shapes_of(spec)))) if made else []


def _draw(rng: np.random.Generator, shape: tuple, kind: str) -> np.ndarray:
    if kind == "kernel":     # Glorot's uniform limit, fan in: every axis but the last
        limit = np.sqrt(6.0 / (int(np.prod(shape[:-1])) + int(shape[-1])))
        return rng.uniform(-limit, limit, shape).astype(np.float32)
    if kind == "embedding":
        return rng.uniform(-0.05, 0.05, shape).astype(np.float32)
    if kind == "gamma":
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    if kind == "variance":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return (0.1 * rng.standard_normal(shape)).astype(np.float32)        # biases, offsets


def initial_weights(spec: CellSpec) -> dict[str, np.ndarray]:
    """The cell's weights by name, in Keras's order and layout (float32), from its seed."""
    rng = np.random.default_rng([spec.seed, 3])
    return {name: _draw(rng, shape, kind) for name, shape, kind in weight_specs(spec)}


def trainable(weights: dict[str, np.ndarray]) -> list[str]:
    """The weights a train step updates (a batch norm's moving statistics are not)."""
    return [name for name in weights if not name.startswith("moving_")]


# --- the inputs and the loss's target -----------------------------------------------------------

def inputs(spec: CellSpec) -> list[np.ndarray]:
    """The cell's inputs: standard-normal float32, or token ids (int32) below input_dim."""
    rng = np.random.default_rng([spec.seed, 4])
    layer = layer_of(spec)
    if layer.ids:
        return [rng.integers(0, arguments(spec)["input_dim"], shape).astype(np.int32)
                for shape in input_shapes(spec)]
    return [rng.standard_normal(shape, dtype=np.float32) for shape in input_shapes(spec)]


def target(spec: CellSpec, shape: Sequence[int]) -> np.ndarray:
    """The loss's target, of the output's shape (channels-last, as Keras's)."""
    return np.random.default_rng([spec.seed, 5]).standard_normal(tuple(shape), dtype=np.float32)


def channels_first(array: np.ndarray) -> np.ndarray:
    """A channels-last array with its channels moved to axis 1 (a convolution's NCHW)."""
    return np.ascontiguousarray(np.moveaxis(array, -1, 1))


def channels_last(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(array, 1, -1))


# --- the answers ----------------------------------------------------------------------------------

def _together(arrays: Sequence[Any]) -> np.ndarray:
    return np.concatenate([np.asarray(a, np.float32).ravel() for a in arrays]) if arrays \
        else np.zeros(0, np.float32)


def forward_answer(output: np.ndarray) -> dict[str, Any]:
    """The output (channels-last): its norms and its first values."""
    output = np.asarray(output, np.float32)
    return {**answers.output(output), "head": answers.head(output)}


def train_answer(loss: float, before: Sequence[np.ndarray],
                 after: Sequence[np.ndarray]) -> dict[str, Any]:
    """One train step from the initial weights: its loss and the norms of its update."""
    update = _together(after) - _together(before)
    return {"loss": float(loss), "update": answers.output(update)["output"]}


def backward_answer(weight_grads: Sequence[np.ndarray],
                    input_grads: Sequence[np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {"input_grads": answers.output(_together(input_grads))["output"]}
    if weight_grads:
        out["weight_grads"] = answers.output(_together(weight_grads))["output"]
    return out


def facts(spec: CellSpec, weights: dict[str, np.ndarray], twin: str) -> dict[str, Any]:
    """What the record's extra says of the cell's layer (Bench.extra)."""
    layer = layer_of(spec)
    return {"layer": layer.name, "layer_family": layer.family, "shapes": shapes_of(spec),
            "arguments": arguments(spec), "input_shapes": [list(s) for s in input_shapes(spec)],
            "parameters": int(sum(w.size for w in weights.values())),
            "optimizer": OPTIMIZER if spec.task == "train" else None, "twin": twin}


def random_answer(spec: CellSpec) -> bool:
    """Whether the phase draws random numbers (Dropout in training mode): no answer then."""
    return layer_of(spec).random and spec.task != "forward"
