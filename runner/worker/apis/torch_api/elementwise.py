"""SELU over a large array with native PyTorch, eager or torch.compile'd."""

from __future__ import annotations

import torch

from ...bench import Bench
from .. import answers, seeded
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE
from . import DTYPES


def selu(x):
    return SCALE * torch.where(x > 0, x, ALPHA * (torch.exp(x) - 1))


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    dtype = DTYPES[spec.precision]
    (values,) = seeded.normal(spec.seed, (batch, n))
    x = torch.from_numpy(values).to(fw.torch_device, dtype)
    fn = fw.compile(selu)
    return Bench(step=lambda: fn(x), sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective={"dtype": str(dtype)},
                 answer=lambda: answers.output(fn(x).float().cpu().numpy()))
