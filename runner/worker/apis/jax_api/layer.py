"""The layer workload on native JAX: each layer's twin as a pure function of (parameters, state,
inputs), with Flax (linen) where Flax has the layer — Dense, Conv, ConvTranspose, Embed,
BatchNorm, LayerNorm, GroupNorm, RMSNorm, MultiHeadDotProductAttention, Dropout, max_pool,
avg_pool, whose parameters are Keras's layout already — and plain JAX elsewhere (jnp.einsum,
lax.scan for LSTM and GRU, jax.nn.dot_product_attention for grouped-query attention, rotary
embedding, SwiGLU). The jit axis applies jax.jit to the whole phase (false: op by op); the
train step is value_and_grad and an Optax SGD update, the new parameters handed to the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ...bench import Bench
from ...protocol import CellSpec
from .. import layer_common as lc
from . import DTYPES, Framework

Weights = dict[str, np.ndarray]
Apply = Callable[[Any, Any, list[Any], bool, Any], tuple[Any, Any]]


class Twin(NamedTuple):
    apply: Apply                     # (params, state, inputs, training, key) → (output, state)
    params: dict[str, Any]           # the trainable weights
    kind: str                        # what it is made of (the record's extra.twin)
    state: dict[str, Any] = {}       # the rest (a batch norm's moving statistics)


def flax_twin(module: nn.Module, params: dict[str, Any], **call: Any) -> Twin:
    def apply(p: Any, s: Any, xs: list[Any], training: bool, key: Any) -> tuple[Any, Any]:
        return module.apply({"params": p}, *xs, **call), s
    return Twin(apply, params, f"flax.linen.{type(module).__name__}")


def function_twin(fn: Callable[..., Any], kind: str, params: dict[str, Any] | None = None) -> Twin:
    """A plain function of the parameters and the inputs (no state, no randomness)."""
    def apply(p: Any, s: Any, xs: list[Any], training: bool, key: Any) -> tuple[Any, Any]:
        return fn(p, *xs), s
    return Twin(apply, params or {}, kind)


def batch_norm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.BatchNorm(momentum=0.99, epsilon=1e-3)          # Keras's momentum and epsilon

    def apply(p: Any, s: Any, xs: list[Any], training: bool, key: Any) -> tuple[Any, Any]:
        variables = {"params": p, "batch_stats": s}
        if not training:
            return module.apply(variables, xs[0], use_running_average=True), s
        out, changed = module.apply(variables, xs[0], use_running_average=False,
                                    mutable=["batch_stats"])
        return out, changed["batch_stats"]

    return Twin(apply, {"scale": w["gamma"], "bias": w["beta"]}, "flax.linen.BatchNorm",
                {"mean": w["moving_mean"], "var": w["moving_variance"]})


def dropout(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.Dropout(a["rate"])

    def apply(p: Any, s: Any, xs: list[Any], training: bool, key: Any) -> tuple[Any, Any]:
        return module.apply({}, xs[0], deterministic=not training, rngs={"dropout": key}), s

    return Twin(apply, {}, "flax.linen.Dropout")


def attention(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]], causal: bool) -> Twin:
    _, heads, dim = w["query_kernel"].shape
    module = nn.MultiHeadDotProductAttention(num_heads=heads, qkv_features=heads * dim,
                                             out_features=w["output_kernel"].shape[-1])
    params = {name: {"kernel": w[f"{keras}_kernel"], "bias": w[f"{keras}_bias"]}
              for name, keras in (("query", "query"), ("key", "key"), ("value", "value"),
                                  ("out", "output"))}

    def apply(p: Any, s: Any, xs: list[Any], training: bool, key: Any) -> tuple[Any, Any]:
        q = xs[0]
        value = xs[1] if len(xs) > 1 else q
        mask = nn.make_causal_mask(jnp.ones(q.shape[:2])) if causal else None
        return module.apply({"params": p}, q, value, mask=mask, deterministic=True), s

    return Twin(apply, params, "flax.linen.MultiHeadDotProductAttention")


def grouped_attention(p: Any, query: Any, value: Any) -> Any:
    project = lambda x, n: jnp.einsum("btd,dnh->btnh", x, p[f"{n}_kernel"]) + p[f"{n}_bias"]  # noqa: E731
    out = jax.nn.dot_product_attention(project(query, "query"), project(value, "key"),
                                       project(value, "value"))
    return jnp.einsum("btnh,nhd->btd", out, p["output_kernel"]) + p["output_bias"]


def lstm(p: Any, x: Any) -> Any:
    inputs = jnp.einsum("btc,cg->tbg", x, p["kernel"]) + p["bias"]      # gates i, f, c, o
    units = p["recurrent_kernel"].shape[0]

    def step(carry: Any, z: Any) -> tuple[Any, None]:
        h, c = carry
        i, f, g, o = jnp.split(z + h @ p["recurrent_kernel"], 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zero = jnp.zeros((x.shape[0], units), x.dtype)
    (h, _), _ = jax.lax.scan(step, (zero, zero), inputs)
    return h


def gru(p: Any, x: Any) -> Any:
    """Keras's GRU (reset_after=True): gates z, r, h, an input and a recurrent bias."""
    inputs = jnp.einsum("btc,cg->tbg", x, p["kernel"]) + p["bias"][0]

    def step(h: Any, z: Any) -> tuple[Any, None]:
        x_z, x_r, x_h = jnp.split(z, 3, axis=-1)
        h_z, h_r, h_h = jnp.split(h @ p["recurrent_kernel"] + p["bias"][1], 3, axis=-1)
        update, reset = jax.nn.sigmoid(x_z + h_z), jax.nn.sigmoid(x_r + h_r)
        return update * h + (1 - update) * jnp.tanh(x_h + reset * h_h), None

    h, _ = jax.lax.scan(step, jnp.zeros((x.shape[0], p["recurrent_kernel"].shape[0]), x.dtype),
                        inputs)
    return h


def rotary(max_wavelength: float) -> Callable[..., Any]:
    """keras-hub's RotaryEmbedding (halves rotated, frequencies computed per call)."""
    def apply(p: Any, x: Any) -> Any:
        dim = x.shape[-1]
        inverse = 1.0 / max_wavelength ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
        freq = jnp.outer(jnp.arange(x.shape[1], dtype=jnp.float32), inverse)
        angles = jnp.concatenate([freq, freq], axis=-1)[None, :, None, :]
        first, second = jnp.split(x, 2, axis=-1)
        return x * jnp.cos(angles).astype(x.dtype) \
            + jnp.concatenate([-second, first], axis=-1) * jnp.sin(angles).astype(x.dtype)
    return apply


def conv(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kernel = w["kernel"]
    module = nn.Conv(kernel.shape[-1], kernel.shape[:-2],
                     padding="SAME" if a.get("padding") == "same" else "VALID")
    return flax_twin(module, {"kernel": kernel, "bias": w["bias"]})


def depthwise(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kh, kw, channels, multiplier = w["depthwise_kernel"].shape
    module = nn.Conv(channels * multiplier, (kh, kw), feature_group_count=channels,
                     padding="VALID")
    kernel = w["depthwise_kernel"].reshape(kh, kw, 1, channels * multiplier)
    return flax_twin(module, {"kernel": kernel, "bias": w["bias"]})


def transposed(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kernel = w["kernel"]                                  # (kh, kw, filters, channels)
    strides = (a.get("strides", 1),) * 2
    module = nn.ConvTranspose(kernel.shape[2], kernel.shape[:2], strides=strides,
                              padding="VALID", transpose_kernel=True)
    return flax_twin(module, {"kernel": kernel, "bias": w["bias"]})


def pool(kind: Callable[..., Any]) -> Callable[..., Twin]:
    def make(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
        size = (a["pool_size"],) * 2
        return function_twin(lambda p, x: kind(x, size, strides=size), f"flax.linen.{kind.__name__}")
    return make


def same(fn: Callable[..., Any], kind: str) -> Callable[..., Twin]:
    return lambda w, a, s: function_twin(lambda p, *xs: fn(*xs), kind)


TWINS: dict[str, Callable[[Weights, dict[str, Any], list[tuple[int, ...]]], Twin]] = {
    "Dense": lambda w, a, s: flax_twin(nn.Dense(w["kernel"].shape[1]), dict(w)),
    "EinsumDense": lambda w, a, s: function_twin(
        lambda p, x: jnp.einsum(a["equation"], x, p["kernel"]) + p["bias"], "jnp.einsum", dict(w)),
    "Embedding": lambda w, a, s: flax_twin(nn.Embed(*w["embeddings"].shape),
                                           {"embedding": w["embeddings"]}),
    "Conv1D": conv, "Conv2D": conv, "Conv3D": conv, "DepthwiseConv2D": depthwise,
    "Conv2DTranspose": transposed,
    "MaxPooling2D": pool(nn.max_pool), "AveragePooling2D": pool(nn.avg_pool),
    "BatchNormalization": batch_norm,
    "LayerNormalization": lambda w, a, s: flax_twin(nn.LayerNorm(epsilon=1e-3),
                                                    {"scale": w["gamma"], "bias": w["beta"]}),
    "GroupNormalization": lambda w, a, s: flax_twin(
        nn.GroupNorm(num_groups=a["groups"], epsilon=1e-3), {"scale": w["gamma"], "bias": w["beta"]}),
    "MultiHeadAttention": lambda w, a, s: attention(w, a, s, causal=False),
    "CausalSelfAttention": lambda w, a, s: attention(w, a, s, causal=True),
    "GroupQueryAttention": lambda w, a, s: function_twin(
        grouped_attention, "jax.nn.dot_product_attention", dict(w)),
    "LSTM": lambda w, a, s: function_twin(lstm, "jax.lax.scan", dict(w)),
    "GRU": lambda w, a, s: function_twin(gru, "jax.lax.scan", dict(w)),
    "Add": same(jnp.add, "jnp.add"),
    "Concatenate": same(lambda x, y: jnp.concatenate([x, y], axis=-1), "jnp.concatenate"),
    "Flatten": same(lambda x: x.reshape(x.shape[0], -1), "jnp.reshape"),
    "UpSampling2D": lambda w, a, s: function_twin(
        lambda p, x: jnp.repeat(jnp.repeat(x, a["size"], axis=1), a["size"], axis=2), "jnp.repeat"),
    "Dropout": dropout,
    "ReLU": same(jax.nn.relu, "jax.nn.relu"),
    "Softmax": same(lambda x: jax.nn.softmax(x, axis=-1), "jax.nn.softmax"),
    "RMSNormalization": lambda w, a, s: flax_twin(nn.RMSNorm(epsilon=a["epsilon"]),
                                                  {"scale": w["scale"]}),
    "RotaryEmbedding": lambda w, a, s: function_twin(rotary(a["max_wavelength"]), "jnp"),
    "SwiGLUFeedForward": lambda w, a, s: function_twin(
        lambda p, x: (jax.nn.silu(x @ p["gate_kernel"]) * (x @ p["up_kernel"])) @ p["down_kernel"],
        "jnp", dict(w)),
}


def build(spec: CellSpec, fw: Framework) -> Bench:
    layer, weights = lc.layer_of(spec), lc.initial_weights(spec)
    twin = TWINS[layer.name](weights, lc.arguments(spec), list(layer.inputs(lc.shapes_of(spec))))
    dtype = DTYPES[spec.precision]
    on_device = lambda tree: jax.tree.map(lambda a: jax.device_put(jnp.asarray(a, dtype)), tree)  # noqa: E731
    params, state = on_device(twin.params), on_device(twin.state)
    xs = [jax.device_put(jnp.asarray(x, jnp.int32 if x.dtype == np.int32 else dtype))
          for x in lc.inputs(spec)]
    key = jax.random.key(spec.seed)
    facts = lc.facts(spec, weights, twin.kind)
    effective = {"parameter_dtype": str(jnp.dtype(dtype)), "layout": "channels-last"}
    if spec.task == "forward":
        forward = fw.compile(lambda p, s, xs: twin.apply(p, s, xs, False, key)[0])
        return Bench(step=lambda: forward(params, state, xs), items_per_step=spec.batch_size,
                     sync=fw.sync, timing=lc.FORWARD_TIMING, effective=effective, extra=facts,
                     answer=lambda: lc.forward_answer(np.asarray(forward(params, state, xs),
                                                                 np.float32)))
    shape = jax.eval_shape(lambda: twin.apply(params, state, xs, True, key)[0]).shape
    target = jax.device_put(jnp.asarray(lc.target(spec, shape), dtype))

    def loss_of(p: Any, s: Any, xs: list[Any]) -> tuple[Any, Any]:
        out, s = twin.apply(p, s, xs, True, key)
        return jnp.mean((out - target) ** 2), s

    if spec.task == "backward":
        return backward_bench(spec, fw, loss_of, params, state, xs, effective, facts)
    return train_bench(spec, fw, loss_of, params, state, xs, effective, facts)


def train_bench(spec: CellSpec, fw: Framework, loss_of: Callable[..., Any], params: Any,
                state: Any, xs: list[Any], effective: dict[str, Any],
                facts: dict[str, Any]) -> Bench:
    optimizer = optax.sgd(lc.LEARNING_RATE)

    def train_step(p: Any, s: Any, o: Any, xs: list[Any]) -> tuple[Any, Any, Any, Any]:
        (loss, s), grads = jax.value_and_grad(loss_of, has_aux=True)(p, s, xs)
        updates, o = optimizer.update(grads, o, p)
        return optax.apply_updates(p, updates), s, o, loss

    step_fn = fw.compile(train_step)
    initial = (params, state, optimizer.init(params))
    current = list(initial)

    def train() -> float:
        p, s, o, loss = step_fn(*current, xs)
        current[:] = [p, s, o]
        return float(loss)          # read back, as train_on_batch does

    def answer() -> dict[str, Any]:
        current[:] = initial
        before = [np.asarray(a, np.float32) for a in jax.tree.leaves(initial[0])]
        loss = train()
        return lc.train_answer(loss, before,
                               [np.asarray(a, np.float32) for a in jax.tree.leaves(current[0])])

    return Bench(step=train, items_per_step=spec.batch_size, returns_to_host=True, loss=float,
                 timing=lc.TRAIN_TIMING, effective={**effective, "optimizer": "optax.sgd"},
                 extra=facts, answer=answer)


def backward_bench(spec: CellSpec, fw: Framework, loss_of: Callable[..., Any], params: Any,
                   state: Any, xs: list[Any], effective: dict[str, Any],
                   facts: dict[str, Any]) -> Bench:
    """The gradients with respect to the parameters and the float inputs (ids have none)."""
    floats = [i for i, x in enumerate(xs) if jnp.issubdtype(x.dtype, jnp.floating)]

    def grads(p: Any, xs: list[Any]) -> Any:
        def loss(p: Any, chosen: list[Any]) -> Any:
            full = list(xs)
            for i, x in zip(floats, chosen, strict=True):
                full[i] = x
            return loss_of(p, state, full)[0]
        return jax.grad(loss, argnums=(0, 1))(p, [xs[i] for i in floats])

    gradient = fw.compile(grads)

    def answer() -> dict[str, Any]:
        of_params, of_inputs = gradient(params, xs)
        return lc.backward_answer([np.asarray(a, np.float32) for a in jax.tree.leaves(of_params)],
                                  [np.asarray(a, np.float32) for a in of_inputs])

    return Bench(step=lambda: gradient(params, xs), items_per_step=spec.batch_size, sync=fw.sync,
                 timing=lc.BACKWARD_TIMING, effective=effective, extra=facts,
                 answer=None if lc.random_answer(spec) else answer)
