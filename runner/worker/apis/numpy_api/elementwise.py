"""SELU over a large array with NumPy."""

from __future__ import annotations

import numpy as np

from ...bench import Bench
from .. import answers, seeded
from ..selu import ALPHA, SCALE, FLOPS_PER_ELEMENT


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    (x,) = seeded.normal(spec.seed, (batch, n))

    def selu():
        return SCALE * np.where(x > 0, x, ALPHA * (np.exp(x) - 1))

    return Bench(step=selu, items_per_step=batch * n, flops_per_step=FLOPS_PER_ELEMENT * batch * n,
                 answer=lambda: answers.output(selu()))
