"""n×n matrix product with native PyTorch."""

from __future__ import annotations

import torch

from ...bench import Bench
from .. import answers, seeded
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    dtype = DTYPES[spec.precision]
    a, b = (torch.from_numpy(x).to(fw.torch_device, dtype)
            for x in seeded.normal(spec.seed, (batch, n, n), (batch, n, n)))
    product = fw.compile(torch.matmul)

    def step():
        out = product(a, b)
        return out.cpu() if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": str(dtype), "to_host": to_host},
                 answer=lambda: answers.output(product(a, b).float().cpu().numpy()))
