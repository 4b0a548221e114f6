"""n×n matrix product with native JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...bench import Bench
from .. import answers, seeded
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    dtype = DTYPES[spec.precision]
    a, b = (jax.device_put(jnp.asarray(x, dtype))
            for x in seeded.normal(spec.seed, (batch, n, n), (batch, n, n)))
    product = fw.compile(jnp.matmul)

    def step():
        out = product(a, b)
        return np.asarray(out) if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": str(np.dtype(dtype)), "to_host": to_host},
                 answer=lambda: answers.output(np.asarray(product(a, b), np.float32)))
