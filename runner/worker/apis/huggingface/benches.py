"""The benches of the hf api: the training step and the forward pass of a Hugging Face model, one
batch per call, as the keras-hub cells time theirs (apis/kerashub/benches.py).

fit: a plain PyTorch step (zero_grad, forward and loss under the precision's autocast, backward,
optimizer step), the loss left on the device: the calls are timed in blocks with one device
synchronisation each, as every native loop is (a Keras train_on_batch call reads its loss back
itself). predict: the forward pass under inference_mode, its outputs copied to the host (as Keras'
predict_on_batch returns NumPy), timed call by call. The batch is made once, on the device.

Precision (the keras-hub cells' dtype policies): float32; bfloat16, the model and its inputs in
bfloat16; mixed_*, float32 weights with the forward under torch.autocast (mixed_float16 trains
through a GradScaler, torch's AMP recipe). jit = true: the model torch.compile'd (fw.compile).
"""

from __future__ import annotations

import contextlib
from typing import Any
from collections.abc import Callable

import numpy as np
import torch

from ... import tuning
from ...protocol import CellSpec
from .. import TorchFramework
from ...bench import Bench
from ...catalog import float_base
from .. import answers
from ..cnn_common import PRECISION_DTYPES
from ..kerashub.inputs import rng

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
FIT_TIMING = ("one training step per call (zero_grad, forward and loss, backward, optimizer "
              "step) on one batch made once on the device; its loss is read back to the host "
              "(loss.item()), as the keras-hub cell's train_on_batch returns it, so the device "
              "has finished: timed call by call on both sides")
# How the fit cells of the Keras table's rows are timed, on Keras and Hugging Face alike: the
# method line of the report says it (findings.method_sentence reads it from the records).
FIT_SYNC = "per_call_loss_read"
PREDICT_TIMING = ("one forward pass per call under torch.inference_mode on one batch made once on "
                  "the device; outputs copied to the host")


def no_preset(spec: CellSpec) -> None:
    """options.preset names a keras-hub preset folder, which Hugging Face's classes cannot read:
    an hf cell with one would compare random weights with real ones."""
    if spec.options.get("preset"):
        raise ValueError("options.preset is a keras-hub preset folder: the hf api builds its "
                         "models from configurations with random weights only")


def attention(spec: CellSpec) -> str:
    """The attention implementation a model is built with: the tuned tier's `attention` knob,
    else transformers' default (PyTorch's scaled_dot_product_attention)."""
    return str(tuning.knob(spec, "attention") or "sdpa")


def compiled(fw: TorchFramework) -> bool:
    """Whether the jit axis asks for torch.compile (effective.jit_compile: the report's eager
    and compiled columns)."""
    return fw.spec.jit not in (False, "auto")


class Precision:
    """The precision axis as parameter dtype, compute dtype and autocast."""

    def __init__(self, fw: TorchFramework, precision: str) -> None:
        param, compute = PRECISION_DTYPES[float_base(precision)]   # quantized: its float base
        self.device_type = fw.torch_device.type
        self.param_dtype, self.compute_dtype = DTYPES[param], DTYPES[compute]
        self.mixed = self.param_dtype != self.compute_dtype
        self.float16 = self.mixed and self.compute_dtype == torch.float16

    def autocast(self) -> Any:
        if not self.mixed:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.compute_dtype)

    def scaler(self) -> Any:
        return torch.amp.GradScaler(self.device_type) if self.float16 else None

    @property
    def effective(self) -> dict[str, Any]:
        return {"parameter_dtype": str(self.param_dtype),
                "autocast": str(self.compute_dtype) if self.mixed else None}


def tensors(fw: TorchFramework, arrays: dict[str, np.ndarray],
            float_dtype: Any) -> dict[str, torch.Tensor]:
    """NumPy arrays on the device: integers as int64 (token ids, labels), floats in float_dtype."""
    out = {}
    for key, array in arrays.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        kind = torch.int64 if array.dtype.kind in "iub" else float_dtype
        out[key] = tensor.to(fw.torch_device, kind)
    return out


def fit_bench(fw: TorchFramework, precision: Precision, loss_of: Callable[[], torch.Tensor],
              optimizer, *, batch: int, effective: dict[str, Any], extra: dict[str, Any],
              first_loss_in_answer: bool) -> Bench:
    """One training step per call; `loss_of()` runs the forward pass and returns the loss."""
    scaler = precision.scaler()

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            loss = loss_of()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.item()

    return Bench(step=step, items_per_step=batch, sync=fw.sync, loss=fw.mean_over_ranks,
                 returns_to_host=True, timing=FIT_TIMING,
                 first_loss_in_answer=first_loss_in_answer,
                 effective={**precision.effective, "grad_scaler": scaler is not None,
                            "fit_sync": FIT_SYNC, **effective}, extra=extra)


def predict_bench(fw: TorchFramework, precision: Precision, forward: Callable[[], Any], *,
                  batch: int, effective: dict[str, Any], extra: dict[str, Any]) -> Bench:
    """One forward pass per call, its outputs on the host; its answer: the outputs' norms."""

    def step() -> Any:
        with torch.inference_mode(), precision.autocast():
            out = forward()
        return to_host(out)

    return Bench(step=step, items_per_step=batch, returns_to_host=True, timing=PREDICT_TIMING,
                 effective={**precision.effective, **effective}, extra=extra,
                 answer=lambda: answers.output(step()))


def to_host(out: Any) -> Any:
    """Every tensor of an output, as float32 NumPy (a dict's, a tuple's, or one)."""
    if isinstance(out, torch.Tensor):
        return out.detach().float().cpu().numpy()
    if isinstance(out, dict):
        return {key: to_host(value) for key, value in out.items()}
    if isinstance(out, (list, tuple)):
        return [to_host(value) for value in out]
    return out


def encoder_fit_bench(fw: TorchFramework, precision: Precision, encoder: torch.nn.Module, *,
                      side: int, batch: int, seed: int, facts: dict[str, Any], doc: str) -> Bench:
    """The study's SAM and Stable Diffusion fit, as apis/kerashub/benches.py's encoder_fit_bench:
    the image encoder alone, MSE against fixed random targets of its output's shape, Adam with
    Keras' defaults (learning rate 1e-3, epsilon 1e-7). The same numbers as the Keras cells'
    (drawn channels-last, transposed to channels-first)."""
    with torch.no_grad(), precision.autocast():
        probe = encoder_output(encoder(torch.zeros(1, 3, side, side, device=fw.torch_device,
                                                   dtype=precision.param_dtype)))
    channels_last = (*probe.shape[2:], probe.shape[1])
    r = rng(seed + 5)
    x = r.uniform(-1.0, 1.0, (batch, side, side, 3)).astype(np.float32)
    y = r.standard_normal((batch, *channels_last)).astype(np.float32)
    data = tensors(fw, {"x": x.transpose(0, 3, 1, 2), "y": y.transpose(0, 3, 1, 2)},
                   precision.param_dtype)
    trained = fw.compile(encoder)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3, eps=1e-7,
                                 **fw.optimizer_options())

    def loss_of() -> torch.Tensor:
        out = encoder_output(trained(data["x"]))
        return torch.nn.functional.mse_loss(out.float(), data["y"].float())

    facts.update(training_step=doc, trained_params=sum(p.numel() for p in encoder.parameters()),
                 target_shape=list(channels_last))
    return fit_bench(fw, precision, loss_of, optimizer, batch=batch,
                     effective={"jit_compile": compiled(fw), "image_size": side,
                                "optimizer": "Adam(lr=1e-3, eps=1e-7)"},
                     extra=facts, first_loss_in_answer=False)


def encoder_output(out: Any) -> torch.Tensor:
    """An encoder's output tensor (transformers' encoders return a ModelOutput)."""
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out
