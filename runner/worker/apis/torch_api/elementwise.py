"""SELU over a large array with native PyTorch, eager or torch.compile'd."""

from __future__ import annotations

import torch

from ...bench import Bench
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE
from . import DTYPES


def selu(x):
    return SCALE * torch.where(x > 0, x, ALPHA * (torch.exp(x) - 1))


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    gen = torch.Generator(device="cpu").manual_seed(spec.seed)
    dtype = DTYPES[spec.precision]
    x = torch.randn(batch, n, generator=gen).to(fw.torch_device, dtype)
    fn = fw.compile(selu)
    return Bench(step=lambda: fn(x), sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective={"dtype": str(dtype)})
