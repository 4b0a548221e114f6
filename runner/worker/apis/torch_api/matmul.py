"""n×n matrix product with native PyTorch."""

from __future__ import annotations

import torch

from ...bench import Bench
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    gen = torch.Generator(device="cpu").manual_seed(spec.seed)
    dtype = DTYPES[spec.precision]
    a = torch.randn(batch, n, n, generator=gen).to(fw.torch_device, dtype)
    b = torch.randn(batch, n, n, generator=gen).to(fw.torch_device, dtype)
    product = fw.compile(torch.matmul)

    def step():
        out = product(a, b)
        return out.cpu() if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": str(dtype), "to_host": to_host})
