"""SELU over a large array with native JAX: op-by-op dispatch or jax.jit (the JAX-basics study)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...bench import Bench
from .. import answers, seeded
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE
from . import DTYPES


def selu(x):
    return SCALE * jnp.where(x > 0, x, ALPHA * (jnp.exp(x) - 1))


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    dtype = DTYPES[spec.precision]
    (values,) = seeded.normal(spec.seed, (batch, n))
    x = jax.device_put(jnp.asarray(values, dtype))
    fn = fw.compile(selu)
    return Bench(step=lambda: fn(x), sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n,
                 effective={"dtype": str(np.dtype(dtype))},
                 answer=lambda: answers.output(np.asarray(fn(x), np.float32)))
