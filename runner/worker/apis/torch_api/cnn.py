"""The CNN on native PyTorch, an adapter to the recipe (apis/cnn_recipe.py): nn.Sequential,
channels-first as torch users write it (the shared weights transposed on load), the AMP step of
apis/torch_amp.py, torch.compile from the jit axis (fw.compile), DDP for a data-parallel cell
(each rank its share of every global batch: Shards.own). The tuned tier's `channels_last` knob
lays the weights and every batch out channels-last (the layout cuDNN's convolutions prefer). predict: a torchao quantization first
where the precision asks (torchao_quantize.py), its error measured on the probe batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ...bench import Bench
from ...protocol import CellSpec
from ...tuning import knob
from .. import cnn_common as cc
from .. import cnn_recipe as recipe
from .. import feeds, torchao_quantize
from ..data_parallel import torch_ddp as ddp
from ..torch_amp import Precision, training_step
from . import Framework

OPTIMIZER = f"RMSprop(lr={cc.LEARNING_RATE}, alpha={cc.RMS_RHO}, eps={cc.RMS_EPSILON})"


def build(spec: CellSpec, fw: Framework) -> Bench:
    return recipe.build(spec, fw, predictor, trainer)


def memory_format(spec: CellSpec) -> torch.memory_format:
    """The layout of the weights and batches: torch's own unless the cell is tuned to
    channels-last."""
    return torch.channels_last if knob(spec, "channels_last", False) else torch.contiguous_format


def model(fw: Framework, weights: list[np.ndarray], precision: Precision) -> nn.Module:
    layers: list[nn.Module] = []
    for index, (fan_in, filters) in enumerate(zip(cc.IMAGE_SHAPE[-1:] + cc.CONV_FILTERS[:-1],
                                                  cc.CONV_FILTERS, strict=True)):
        layers += [nn.Conv2d(fan_in, filters, cc.KERNEL, padding="same"), nn.ReLU()]
        layers += [nn.MaxPool2d(2)] if index % 2 == 1 else []
    net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(cc.FLAT, cc.HIDDEN), nn.ReLU(),
                        nn.Linear(cc.HIDDEN, cc.CLASSES))
    with torch.no_grad():
        for parameter, array in zip(net.parameters(), recipe.channels_first(weights), strict=True):
            parameter.copy_(torch.from_numpy(array))
    layout = memory_format(fw.spec)
    fw.effective["memory_format"] = str(layout).removeprefix("torch.")
    return net.to(fw.torch_device, precision.param_dtype, memory_format=layout)


def logits(fw: Framework, net: nn.Module, precision: Precision) -> Any:
    """NHWC images through the eager module (a compiled one would recompile for no_grad)."""
    def of(x: np.ndarray) -> np.ndarray:
        nchw = torch.from_numpy(x.transpose(0, 3, 1, 2).copy())
        with torch.no_grad(), precision.autocast():
            return net(nchw.to(fw.torch_device, precision.param_dtype)).float().cpu().numpy()
    return of


def predictor(spec: CellSpec, fw: Framework, data: cc.CnnData,
              weights: list[np.ndarray]) -> recipe.Predictor:
    precision = Precision(fw.torch_device.type, spec.precision)
    net = model(fw, weights, precision).eval()
    found = torchao_quantize.apply(spec, fw, net, lambda: logits(fw, net, precision)(
        cc.probe(data)[0]))
    compiled, x = fw.compile(net), torch.from_numpy(
        cc.predict_batch(spec, data).transpose(0, 3, 1, 2).copy()).to(
            fw.torch_device, precision.param_dtype, memory_format=memory_format(spec))

    def forward() -> torch.Tensor:
        with torch.no_grad(), precision.autocast():
            return compiled(x)

    return recipe.Predictor(recipe.forward_bench(spec, fw, forward, precision.effective),
                            sum(p.numel() for p in net.parameters()), quantization=found,
                            to_numpy=lambda out: out.float().cpu().numpy())


def ways(spec: CellSpec, fw: Framework, data: cc.CnnData) -> feeds.Ways:
    """The data axis on torch; a data-parallel rank takes its share of each global batch."""
    device, own, batch = fw.torch_device, fw.shards.own, data.batch_size
    x, y = np.ascontiguousarray(data.x_train.transpose(0, 3, 1, 2)), data.y_train.astype(np.int64)

    def loaded() -> feeds.Fed:
        loader = feeds.torch_loader(x, y, batch, spec.seed, pin=fw.device == "gpu")
        return ((xb.to(device, non_blocking=True), yb.to(device, non_blocking=True))
                for xb, yb in feeds.forever(loader)), feeds.LOADER_TEXT

    def preloaded() -> feeds.Fed:
        x_dev, y_dev = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

        def epoch(order: np.ndarray) -> Any:    # one asynchronous copy per epoch; a step slices it
            host = torch.from_numpy(np.ascontiguousarray(own(order.T).T))
            host = host.pin_memory() if device.type == "cuda" else host
            return host.to(device, non_blocking=True).unbind(0)

        return ((x_dev[i], y_dev[i]) for i in cc.device_batches(len(y), batch, spec.seed, epoch)), \
            "tensors preloaded on the device, indexed per step (indices copied once per epoch)"

    return feeds.Ways(dataset=loaded, device=preloaded, arrays=lambda: feeds.sliced(
        x, y, map(own, cc.batch_indices(len(y), batch, spec.seed)),
        lambda rows: torch.from_numpy(rows).to(device), "NumPy arrays sliced per step, copied to the device"))


def trainer(spec: CellSpec, fw: Framework, data: cc.CnnData,
            weights: list[np.ndarray]) -> recipe.Trainer:
    precision = Precision(fw.torch_device.type, spec.precision,
                          grad_scaler=bool(spec.options.get("grad_scaler", True)))
    net = model(fw, weights, precision)
    optimizer = torch.optim.RMSprop(net.parameters(), lr=cc.LEARNING_RATE, alpha=cc.RMS_RHO,
                                    eps=cc.RMS_EPSILON)
    trained = fw.compile(ddp.wrap(fw, net))
    layout = memory_format(spec)
    step = training_step(optimizer, precision, lambda xb, yb: nn.functional.cross_entropy(
        trained(xb.to(dtype=precision.param_dtype, memory_format=layout)), yb))
    loop = recipe.native_loop(
        spec, fw, data, step, ways(spec, fw, data), loss=fw.mean_over_ranks,
        timing="one training step (next batch, forward, backward, optimizer step)",
        effective={**precision.effective, "grad_scaler": precision.scaled, "optimizer": OPTIMIZER})
    return recipe.Trainer(logits(fw, net, precision), sum(p.numel() for p in net.parameters()),
                          loop)
