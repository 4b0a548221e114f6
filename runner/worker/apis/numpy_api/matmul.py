"""n×n matrix product with NumPy (BLAS)."""

from __future__ import annotations

import numpy as np

from ...bench import Bench
from .. import answers, seeded


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    a, b = seeded.normal(spec.seed, (batch, n, n), (batch, n, n))
    # Host memory already: to_host is a no-op for NumPy.
    return Bench(step=lambda: np.matmul(a, b), items_per_step=batch,
                 flops_per_step=2.0 * batch * n**3,
                 answer=lambda: answers.output(np.matmul(a, b)))
