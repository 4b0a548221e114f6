"""torchao's quantized tier on native torch and the `hf` API: `quantize_(model, config)` on the
built model whose weights are seeded, before its predict or generate is timed
(docs/quantized.md). The modes (catalog/precisions.py) map onto torchao's configurations:

- int8: Int8DynamicActivationInt8WeightConfig(): int8 weights per output channel, activations
  quantized per token at call time;
- int8_weight_only: Int8WeightOnlyConfig();
- int4: Int4WeightOnlyConfig(group_size=128) in tinygemm's packed layout: CUDA only (torch's own
  _weight_int4pack_mm; torchao's default layout, "plain", calls the kernels of mslk, a package
  no stack here installs);
- float8: Float8DynamicActivationFloat8WeightConfig(): CUDA, compute capability >= 8.9 only.

quantize_ swaps the weights of nn.Linear layers for torchao tensor subclasses (embeddings and
convolutions stay float, unlike Keras, which quantizes embeddings too). torchao is part of the
torch stacks (images/torch, images/hf-torch); its CUDA kernel libraries print a line at import on
a machine without a GPU, which is harmless.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from ..protocol import CellSpec
from . import TorchFramework
from ..catalog import float_base, quantized_mode
from ..catalog.quantized_rules import TORCHAO_CUDA_ONLY
from . import quantized
from .quantized import Quantization

CONFIGS = {"int8": ("Int8DynamicActivationInt8WeightConfig", {}),
           "int8_weight_only": ("Int8WeightOnlyConfig", {}),
           "int4": ("Int4WeightOnlyConfig", {"group_size": 128,
                                             "int4_packing_format": "tile_packed_to_4d"}),
           "float8": ("Float8DynamicActivationFloat8WeightConfig", {})}


def tensor_bytes(tensor: Any) -> int:
    """Bytes a tensor stores: a torchao subclass's inner tensors (int8 data and scales), else its
    elements times their size."""
    flatten = getattr(type(tensor), "__tensor_flatten__", None)
    if flatten is not None:
        names, _ = tensor.__tensor_flatten__()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return int(tensor.numel()) * int(tensor.element_size())


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers, each tensor once (tied weights once)."""
    return sum(tensor_bytes(t) for _, t in model.named_parameters()) + \
        sum(tensor_bytes(t) for _, t in model.named_buffers())


def is_quantized_weight(weight: Any) -> bool:
    return weight is not None and hasattr(type(weight), "__tensor_flatten__")


def check_device(mode: str, device: str) -> None:
    """int4 and float8 need CUDA, float8 a compute capability of 8.9+: elsewhere the cell fails
    with the reason (a matrix that sets device = "cpu" gets the same reason as a planned NA,
    catalog/quantized_rules.py)."""
    if mode in TORCHAO_CUDA_ONLY and device != "gpu":
        raise RuntimeError(f"{TORCHAO_CUDA_ONLY[mode]}; this cell runs on the {device}")
    if mode == "float8":
        capability = torch.cuda.get_device_capability(0)
        if tuple(capability) < quantized.FLOAT8_MIN_CAPABILITY:
            raise RuntimeError(f"{TORCHAO_CUDA_ONLY[mode]}; this GPU's is "
                               f"{capability[0]}.{capability[1]}")


def apply(spec: CellSpec, fw: TorchFramework, model: torch.nn.Module,
          probe: Callable[[], Any]) -> Quantization | None:
    """Quantizes `model` in place when the cell's precision is quantized (None otherwise), with
    the error figure from `probe` (the model's logits on fixed inputs) before and after."""
    mode = quantized_mode(spec.precision)
    if mode is None:
        return None
    check_device(mode, fw.device)
    import torchao
    from torchao import quantization as tq

    name, kwargs = CONFIGS[mode]
    config = getattr(tq, name)(**kwargs)
    # Each layer's own parameters (weight and bias), as Keras's count_params counts a layer's.
    before = {id(m): sum(int(p.numel()) for p in m.parameters(recurse=False))
              for m in model.modules()}
    found = Quantization(mode, "torchao", torchao.__version__, float_base(spec.precision),
                         params_total=sum(int(p.numel()) for p in model.parameters()),
                         config=f"quantize_(model, {name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}))")
    quantized.measured(found, probe, lambda: tq.quantize_(model, config),
                       lambda: model_bytes(model))
    layers: Counter[str] = Counter()
    for module in model.modules():
        if is_quantized_weight(getattr(module, "weight", None)):
            layers[type(module).__name__] += 1
            found.params_quantized += before.get(id(module), 0)
    found.layers = dict(layers)
    capability = torch.cuda.get_device_capability(0) if fw.device == "gpu" else None
    found.execution = quantized.float8_execution(mode, fw.device, capability)
    return found
