"""n×n matrix product with NumPy (BLAS)."""

from __future__ import annotations

import numpy as np

from ...bench import Bench


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    rng = np.random.default_rng(spec.seed)
    a = rng.standard_normal((batch, n, n), dtype=np.float32)
    b = rng.standard_normal((batch, n, n), dtype=np.float32)
    # Host memory already: to_host is a no-op for NumPy.
    return Bench(step=lambda: np.matmul(a, b), items_per_step=batch,
                 flops_per_step=2.0 * batch * n**3)
