"""n×n matrix product with native TensorFlow."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...bench import Bench
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    rng = np.random.default_rng(spec.seed)
    dtype = DTYPES[spec.precision]
    with tf.device(fw.effective["device"]):
        a = tf.cast(tf.constant(rng.standard_normal((batch, n, n), dtype=np.float32)), dtype)
        b = tf.cast(tf.constant(rng.standard_normal((batch, n, n), dtype=np.float32)), dtype)
    product = fw.compile(tf.linalg.matmul)

    def step():
        out = product(a, b)
        return out.numpy() if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": dtype.name, "to_host": to_host})
