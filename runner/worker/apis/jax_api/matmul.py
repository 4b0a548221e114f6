"""n×n matrix product with native JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...bench import Bench
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    rng = np.random.default_rng(spec.seed)
    dtype = DTYPES[spec.precision]
    a = jax.device_put(jnp.asarray(rng.standard_normal((batch, n, n), dtype=np.float32), dtype))
    b = jax.device_put(jnp.asarray(rng.standard_normal((batch, n, n), dtype=np.float32), dtype))
    product = fw.compile(jnp.matmul)

    def step():
        out = product(a, b)
        return np.asarray(out) if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": str(np.dtype(dtype)), "to_host": to_host})
