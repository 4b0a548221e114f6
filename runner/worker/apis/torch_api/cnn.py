"""The CNN trained with a standard PyTorch loop: zero_grad, forward under autocast, backward,
optimizer step (through a GradScaler when asked), with the model optionally torch.compile'd
(the jit axis, via fw.compile). Channels-first, as torch users write it; the shared Keras-layout
initial weights are transposed on load so that the function computed is the same.

Precision: mixed_* runs forward and loss under torch.autocast with float32 parameters; for
mixed_float16 a torch.amp.GradScaler scales the loss unless options.grad_scaler = false (the
AMP recipe's default); bfloat16 converts the model and inputs to bfloat16.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ...protocol import CellSpec
from ...catalog import float_base
from ...bench import Bench
from .. import cnn_common as cc
from ..data_parallel import torch_ddp as ddp
from .. import quantized, torchao_quantize
from . import Framework

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_model() -> nn.Sequential:
    layers: list[nn.Module] = []
    channels = cc.IMAGE_SHAPE[-1]
    for index, filters in enumerate(cc.CONV_FILTERS):
        layers += [nn.Conv2d(channels, filters, cc.KERNEL, padding="same"), nn.ReLU()]
        if index % 2 == 1:
            layers.append(nn.MaxPool2d(2))
        channels = filters
    layers += [nn.Flatten(), nn.Linear(cc.FLAT, cc.HIDDEN), nn.ReLU(), nn.Linear(cc.HIDDEN, cc.CLASSES)]
    return nn.Sequential(*layers)


def torch_layout(weights: list[np.ndarray]) -> list[np.ndarray]:
    """Keras layout → torch layout: conv (kh, kw, in, out) → (out, in, kh, kw); dense (in, out)
    → (out, in); the first dense kernel's rows from height-width-channel to channel-height-width
    order, because torch flattens channels-first feature maps."""
    out = []
    for array in weights:
        if array.ndim == 4:
            array = array.transpose(3, 2, 0, 1)
        elif array.ndim == 2:
            if array.shape[0] == cc.FLAT:
                side = int(np.sqrt(cc.FLAT // cc.CONV_FILTERS[-1]))
                array = (array.reshape(side, side, cc.CONV_FILTERS[-1], -1)
                         .transpose(2, 0, 1, 3).reshape(cc.FLAT, -1))
            array = array.T
        out.append(np.ascontiguousarray(array))
    return out


def batches(spec: CellSpec, fw: Framework, data: cc.CnnData, x: np.ndarray):
    """An endless iterator of (images, labels) on the device, per the data axis, and what it is.
    A data-parallel rank takes its share of each global batch (Shards.own)."""
    device, y = fw.torch_device, data.y_train.astype(np.int64)
    own = fw.shards.own
    if spec.data == "dataset":
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
            batch_size=data.batch_size, shuffle=True, drop_last=True,
            pin_memory=fw.device == "gpu", generator=torch.Generator().manual_seed(spec.seed))

        def from_loader():
            while True:
                for xb, yb in loader:
                    yield xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)

        return from_loader(), "torch DataLoader(shuffle, pin_memory on GPU, no workers)"
    if spec.data == "device":
        x_dev, y_dev = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

        def epoch_on_device(order: np.ndarray):
            # One asynchronous copy per epoch from pinned memory; a step only slices it (a view).
            host = torch.from_numpy(np.ascontiguousarray(own(order.T).T))
            if device.type == "cuda":
                host = host.pin_memory()
            return host.to(device, non_blocking=True).unbind(0)

        indices = cc.device_batches(len(y), data.batch_size, spec.seed, epoch_on_device)
        return ((x_dev[i], y_dev[i]) for i in indices), \
            "tensors preloaded on the device, indexed per step (indices copied once per epoch)"
    order = (own(o) for o in cc.batch_indices(len(y), data.batch_size, spec.seed))
    return ((torch.from_numpy(x[o]).to(device), torch.from_numpy(y[o]).to(device)) for o in order), \
        "NumPy arrays sliced per step, copied to the device"


def initial_net(weights: list[np.ndarray], device: Any, dtype: Any) -> nn.Module:
    """The model with the shared initial weights, on the device in the parameter dtype."""
    net = build_model()
    with torch.no_grad():
        for parameter, array in zip(net.parameters(), torch_layout(weights), strict=True):
            parameter.copy_(torch.from_numpy(array))
    return net.to(device, dtype)


def predict(spec: CellSpec, fw: Framework, data: cc.CnnData, weights: list[np.ndarray]) -> Bench:
    """One forward pass over a batch on the device per call (no_grad; the jit axis compiles
    it); a quantized precision quantizes the model with torchao first (torchao_quantize.py),
    its error measured on the probe batch."""
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[float_base(spec.precision)])
    net = initial_net(weights, fw.torch_device, param_dtype).eval()
    mixed = compute_dtype != param_dtype

    def on_device(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(fw.torch_device, param_dtype)

    def forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), torch.autocast(fw.torch_device.type, dtype=compute_dtype,
                                             enabled=mixed):
            return model(x)

    x_probe = on_device(cc.probe(data)[0])
    parameters = sum(p.numel() for p in net.parameters())
    found = torchao_quantize.apply(spec, fw, net,
                                   lambda: forward(net, x_probe).float().cpu().numpy())
    model = fw.compile(net)
    x = on_device(cc.predict_batch(spec, data))
    bench = Bench(step=lambda: forward(model, x), items_per_step=spec.batch_size, sync=fw.sync,
                  timing=cc.PREDICT_TIMING,
                  effective={"parameter_dtype": str(param_dtype),
                             "autocast": str(compute_dtype) if mixed else None},
                  extra=cc.predict_extra(data, weights, parameters),
                  answer=lambda: cc.predict_answer(forward(model, x).float().cpu().numpy()))
    return quantized.record(bench, found)


def build(spec: CellSpec, fw: Framework) -> Bench:
    data = cc.make_data(spec)
    weights = cc.initial_weights(spec.seed)
    if spec.task == "predict":
        return predict(spec, fw, data, weights)
    param_dtype, compute_dtype = (DTYPES[d] for d in cc.PRECISION_DTYPES[spec.precision])
    net = initial_net(weights, fw.torch_device, param_dtype)
    device_type = fw.torch_device.type
    mixed = compute_dtype != param_dtype

    def autocast():
        return torch.autocast(device_type, dtype=compute_dtype, enabled=mixed)

    def logits_of(x: np.ndarray) -> np.ndarray:
        """Forward pass of the eager module (a compiled one would recompile for no_grad)."""
        nchw = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(fw.torch_device, param_dtype)
        with torch.no_grad(), autocast():
            return net(nchw).float().cpu().numpy()

    x_probe, y_probe = cc.probe(data)
    initial = cc.initial_extra(logits_of(x_probe), y_probe)

    optimizer = torch.optim.RMSprop(net.parameters(), lr=cc.LEARNING_RATE, alpha=cc.RMS_RHO,
                                    eps=cc.RMS_EPSILON)
    use_scaler = bool(spec.options.get("grad_scaler", True)) and spec.precision == "mixed_float16"
    scaler = torch.amp.GradScaler(device_type) if use_scaler else None
    model = fw.compile(ddp.wrap(fw, net))
    x_train = np.ascontiguousarray(data.x_train.transpose(0, 3, 1, 2))   # NHWC → NCHW
    stream, data_text = batches(spec, fw, data, x_train)

    def step() -> Any:
        xb, yb = next(stream)
        xb = xb.to(param_dtype)
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = nn.functional.cross_entropy(model(xb), yb)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()

    extra = cc.base_extra(data, weights, sum(p.numel() for p in net.parameters()), initial)
    return Bench(
        drive=cc.stepped_drive(step, extra, data), calls_per_epoch=data.steps_per_epoch,
        items_per_step=spec.batch_size, sync=fw.sync, loss=fw.mean_over_ranks,
        evaluate=lambda: cc.evaluation(logits_of, data),
        timing="one training step (next batch, forward, backward, optimizer step)",
        effective={
            "parameter_dtype": str(param_dtype),
            "autocast": str(compute_dtype) if mixed else None,
            "grad_scaler": use_scaler,
            "data": data_text,
            "optimizer": f"RMSprop(lr={cc.LEARNING_RATE}, alpha={cc.RMS_RHO}, eps={cc.RMS_EPSILON})",
        },
        extra=extra, **cc.answer_fields(spec, initial, native_loop=True))
