"""The layer workload on native PyTorch: each layer's twin as a torch user writes it (torch.nn's
module where it has one: Linear, Conv*d, ConvTranspose2d, Embedding, BatchNorm*d, LayerNorm,
GroupNorm, RMSNorm, LSTM, GRU, pooling, Upsample; attention as nn.Linear projections around
F.scaled_dot_product_attention), carrying the recipe's seeded Keras-layout weights
(apis/layer_common.py) in torch's layout. Convolutions, pooling, upsampling and the batch and
group norms run channels-first, as torch's modules take them: their inputs are moved to NCHW
once, before the timed calls (the output back for the answer). The jit axis compiles the module
(torch.compile); the train step is zero_grad, forward, MSE, backward, SGD step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from ...bench import Bench
from ...protocol import CellSpec
from .. import layer_common as lc
from . import DTYPES, Framework

F = nn.functional
Weights = dict[str, np.ndarray]


class Twin(NamedTuple):
    module: nn.Module
    channels_first: bool = False      # takes and returns channels at axis 1 (NCHW)


def put(parameter: torch.Tensor, array: np.ndarray) -> None:
    with torch.no_grad():
        parameter.copy_(torch.from_numpy(np.ascontiguousarray(array)))


class Lambda(nn.Module):
    """A layer without weights: a function of its inputs."""

    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs)


class Einsum(nn.Module):
    def __init__(self, equation: str, kernel: np.ndarray, bias: np.ndarray) -> None:
        super().__init__()
        self.equation = equation
        self.kernel = nn.Parameter(torch.from_numpy(kernel))
        self.bias = nn.Parameter(torch.from_numpy(bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum(self.equation, x, self.kernel) + self.bias


class Attention(nn.Module):
    """Multi-head (grouped-query, causal) attention: nn.Linear projections around
    F.scaled_dot_product_attention."""

    def __init__(self, w: Weights, causal: bool) -> None:
        super().__init__()
        _, self.heads, dim = w["query_kernel"].shape
        kv_heads = w["key_kernel"].shape[1]
        self.dim, self.kv_heads, self.causal = dim, kv_heads, causal
        self.q, self.k, self.v = (self._linear(w[f"{n}_kernel"], w[f"{n}_bias"])
                                  for n in ("query", "key", "value"))
        self.o = nn.Linear(self.heads * dim, w["output_kernel"].shape[-1])
        put(self.o.weight, w["output_kernel"].reshape(self.heads * dim, -1).T)
        put(self.o.bias, w["output_bias"])

    @staticmethod
    def _linear(kernel: np.ndarray, bias: np.ndarray) -> nn.Linear:
        linear = nn.Linear(kernel.shape[0], kernel.shape[1] * kernel.shape[2])
        put(linear.weight, kernel.reshape(kernel.shape[0], -1).T)
        put(linear.bias, bias.reshape(-1))
        return linear

    def forward(self, query: torch.Tensor, value: torch.Tensor | None = None) -> torch.Tensor:
        value = query if value is None else value
        batch, steps = query.shape[:2]

        def heads(x: torch.Tensor, count: int) -> torch.Tensor:
            return x.view(batch, x.shape[1], count, self.dim).transpose(1, 2)

        q = heads(self.q(query), self.heads)
        k, v = heads(self.k(value), self.kv_heads), heads(self.v(value), self.kv_heads)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                             enable_gqa=self.kv_heads != self.heads)
        return self.o(out.transpose(1, 2).reshape(batch, steps, self.heads * self.dim))


class LastStep(nn.Module):
    """An nn.LSTM / nn.GRU whose last output is the layer's (Keras's return_sequences=False)."""

    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0][:, -1]


class SwiGLU(nn.Module):
    def __init__(self, w: Weights) -> None:
        super().__init__()
        self.gate, self.up, self.down = (self._linear(w[f"{n}_kernel"])
                                         for n in ("gate", "up", "down"))

    @staticmethod
    def _linear(kernel: np.ndarray) -> nn.Linear:
        linear = nn.Linear(*kernel.shape, bias=False)
        put(linear.weight, kernel.T)
        return linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def rotary(max_wavelength: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """keras-hub's RotaryEmbedding (halves rotated, frequencies computed per call)."""
    def apply(x: torch.Tensor) -> torch.Tensor:
        dim = x.shape[-1]
        inverse = 1.0 / max_wavelength ** (torch.arange(0, dim, 2, device=x.device,
                                                        dtype=torch.float32) / dim)
        positions = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
        freq = torch.outer(positions, inverse)
        angles = torch.cat([freq, freq], dim=-1)[None, :, None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin
    return apply


def linear(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.Linear(*w["kernel"].shape)
    put(module.weight, w["kernel"].T)
    put(module.bias, w["bias"])
    return Twin(module)


def conv(rank: int) -> Callable[..., Twin]:
    def make(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
        kernel = w["kernel"]
        module = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[rank - 1](
            kernel.shape[-2], kernel.shape[-1], kernel.shape[:rank],
            padding="same" if a.get("padding") == "same" else 0)
        put(module.weight, np.transpose(kernel, (rank + 1, rank, *range(rank))))
        put(module.bias, w["bias"])
        return Twin(module, channels_first=True)
    return make


def depthwise(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kernel = w["depthwise_kernel"]                      # (kh, kw, channels, multiplier)
    kh, kw, channels, multiplier = kernel.shape
    module = nn.Conv2d(channels, channels * multiplier, (kh, kw), groups=channels)
    put(module.weight, np.transpose(kernel, (2, 3, 0, 1)).reshape(channels * multiplier, 1, kh, kw))
    put(module.bias, w["bias"])
    return Twin(module, channels_first=True)


def transposed(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kernel = w["kernel"]                                # (kh, kw, filters, channels)
    module = nn.ConvTranspose2d(kernel.shape[3], kernel.shape[2], kernel.shape[:2],
                                stride=a.get("strides", 1))
    put(module.weight, np.transpose(kernel, (3, 2, 0, 1)))
    put(module.bias, w["bias"])
    return Twin(module, channels_first=True)


def batch_norm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    kind = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)[len(shapes[0]) - 2]
    module = kind(len(w["gamma"]), eps=1e-3, momentum=0.01)     # Keras's epsilon and momentum
    for name, key in (("weight", "gamma"), ("bias", "beta"), ("running_mean", "moving_mean"),
                      ("running_var", "moving_variance")):
        put(getattr(module, name), w[key])
    return Twin(module, channels_first=True)


def norm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.LayerNorm(len(w["gamma"]), eps=1e-3)
    put(module.weight, w["gamma"])
    put(module.bias, w["beta"])
    return Twin(module)


def group_norm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.GroupNorm(a["groups"], len(w["gamma"]), eps=1e-3)
    put(module.weight, w["gamma"])
    put(module.bias, w["beta"])
    return Twin(module, channels_first=True)


def rms_norm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.RMSNorm(len(w["scale"]), eps=a["epsilon"])
    put(module.weight, w["scale"])
    return Twin(module)


def lstm(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.LSTM(shapes[0][-1], a["units"], batch_first=True)     # gates i, f, g, o: Keras's
    put(module.weight_ih_l0, w["kernel"].T)
    put(module.weight_hh_l0, w["recurrent_kernel"].T)
    put(module.bias_ih_l0, w["bias"])
    put(module.bias_hh_l0, np.zeros_like(w["bias"]))
    module.bias_hh_l0.requires_grad_(False)       # Keras has one bias: torch's second stays 0
    return Twin(LastStep(module))


def gru(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    def torch_order(array: np.ndarray) -> np.ndarray:     # Keras z, r, h → torch r, z, n
        z, r, h = np.split(array, 3, axis=-1)
        return np.concatenate([r, z, h], axis=-1)

    module = nn.GRU(shapes[0][-1], a["units"], batch_first=True)    # Keras's reset_after=True
    put(module.weight_ih_l0, torch_order(w["kernel"]).T)
    put(module.weight_hh_l0, torch_order(w["recurrent_kernel"]).T)
    put(module.bias_ih_l0, torch_order(w["bias"][0]))
    put(module.bias_hh_l0, torch_order(w["bias"][1]))
    return Twin(LastStep(module))


def embedding(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    module = nn.Embedding(*w["embeddings"].shape)
    put(module.weight, w["embeddings"])
    return Twin(module)


def einsum(w: Weights, a: dict[str, Any], shapes: list[tuple[int, ...]]) -> Twin:
    return Twin(Einsum(a["equation"], w["kernel"], w["bias"]))


def plain(module: Callable[[dict[str, Any]], nn.Module], channels_first: bool = False) -> Callable[..., Twin]:
    return lambda w, a, shapes: Twin(module(a), channels_first)


TWINS: dict[str, Callable[[Weights, dict[str, Any], list[tuple[int, ...]]], Twin]] = {
    "Dense": linear, "EinsumDense": einsum, "Embedding": embedding,
    "Conv1D": conv(1), "Conv2D": conv(2), "Conv3D": conv(3), "DepthwiseConv2D": depthwise,
    "Conv2DTranspose": transposed,
    "MaxPooling2D": plain(lambda a: nn.MaxPool2d(a["pool_size"]), channels_first=True),
    "AveragePooling2D": plain(lambda a: nn.AvgPool2d(a["pool_size"]), channels_first=True),
    "BatchNormalization": batch_norm, "LayerNormalization": norm, "GroupNormalization": group_norm,
    "MultiHeadAttention": lambda w, a, s: Twin(Attention(w, causal=False)),
    "GroupQueryAttention": lambda w, a, s: Twin(Attention(w, causal=False)),
    "CausalSelfAttention": lambda w, a, s: Twin(Attention(w, causal=True)),
    "LSTM": lstm, "GRU": gru,
    "Add": plain(lambda a: Lambda(torch.add)),
    "Concatenate": plain(lambda a: Lambda(lambda x, y: torch.cat([x, y], dim=-1))),
    "Flatten": plain(lambda a: nn.Flatten()),
    "UpSampling2D": plain(lambda a: nn.Upsample(scale_factor=a["size"], mode="nearest"),
                          channels_first=True),
    "Dropout": plain(lambda a: nn.Dropout(a["rate"])),
    "ReLU": plain(lambda a: nn.ReLU()), "Softmax": plain(lambda a: nn.Softmax(dim=-1)),
    "RMSNormalization": rms_norm,
    "RotaryEmbedding": plain(lambda a: Lambda(rotary(a["max_wavelength"]))),
    "SwiGLUFeedForward": lambda w, a, s: Twin(SwiGLU(w)),
}


def build(spec: CellSpec, fw: Framework) -> Bench:
    layer, weights = lc.layer_of(spec), lc.initial_weights(spec)
    twin = TWINS[layer.name](weights, lc.arguments(spec), list(layer.inputs(lc.shapes_of(spec))))
    dtype = DTYPES[spec.precision]
    module = twin.module.to(fw.torch_device, dtype)
    initial = {k: v.detach().clone() for k, v in module.state_dict().items()}
    params = [p for p in module.parameters() if p.requires_grad]

    def device(array: np.ndarray, float_type: Any = dtype) -> torch.Tensor:
        array = lc.channels_first(array) if twin.channels_first else array
        on = torch.from_numpy(array).to(fw.torch_device)
        return on if array.dtype == np.int32 else on.to(float_type)

    def keras_layout(out: torch.Tensor) -> np.ndarray:
        array = out.detach().float().cpu().numpy()
        return lc.channels_last(array) if twin.channels_first else array

    xs = [device(x) for x in lc.inputs(spec)]
    model = fw.compile(module)
    facts = lc.facts(spec, weights, type(twin.module).__name__)
    effective = {"parameter_dtype": str(dtype), "layout": "channels-first (NCHW)"
                 if twin.channels_first else "channels-last"}
    if spec.task == "forward":
        module.eval()

        def forward() -> torch.Tensor:
            with torch.no_grad():
                return model(*xs)

        return Bench(step=forward, items_per_step=spec.batch_size, sync=fw.sync,
                     timing=lc.FORWARD_TIMING, effective=effective, extra=facts,
                     answer=lambda: lc.forward_answer(keras_layout(forward())))
    module.train()
    with torch.no_grad():
        target = device(lc.target(spec, keras_layout(model(*xs)).shape))
    if spec.task == "backward":
        return backward_bench(spec, fw, model, params, xs, target, keras_layout, effective, facts)
    optimizer = torch.optim.SGD(params, lr=lc.LEARNING_RATE)

    def train() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(*xs), target)
        loss.backward()
        optimizer.step()
        return float(loss)          # read back, as train_on_batch does

    def answer() -> dict[str, Any]:
        module.load_state_dict(initial)
        before = [p.detach().float().cpu().numpy().copy() for p in params]
        loss = train()
        return lc.train_answer(loss, before, [p.detach().float().cpu().numpy() for p in params])

    return Bench(step=train, items_per_step=spec.batch_size, returns_to_host=True, loss=float,
                 timing=lc.TRAIN_TIMING, effective={**effective, "optimizer": lc.OPTIMIZER},
                 extra=facts, answer=answer)


def backward_bench(spec: CellSpec, fw: Framework, model: Any, params: list[torch.Tensor],
                   xs: list[torch.Tensor], target: torch.Tensor,
                   keras_layout: Callable[[torch.Tensor], np.ndarray],
                   effective: dict[str, Any], facts: dict[str, Any]) -> Bench:
    """The gradients of the loss with respect to the weights and the (float) inputs."""
    inputs = [x.requires_grad_(True) for x in xs if x.is_floating_point()]

    def backward() -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(F.mse_loss(model(*xs), target), [*params, *inputs])

    def answer() -> dict[str, Any]:
        grads = backward()
        return lc.backward_answer([g.float().cpu().numpy() for g in grads[:len(params)]],
                                  [keras_layout(g) for g in grads[len(params):]])

    return Bench(step=backward, items_per_step=spec.batch_size, sync=fw.sync,
                 timing=lc.BACKWARD_TIMING, effective=effective, extra=facts,
                 answer=None if lc.random_answer(spec) else answer)
