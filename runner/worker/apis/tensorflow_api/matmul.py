"""n×n matrix product with native TensorFlow."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...bench import Bench
from .. import answers, seeded
from . import DTYPES


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    dtype = DTYPES[spec.precision]
    with tf.device(fw.effective["device"]):
        a, b = (tf.cast(tf.constant(x), dtype)
                for x in seeded.normal(spec.seed, (batch, n, n), (batch, n, n)))
    product = fw.compile(tf.linalg.matmul)

    def step():
        out = product(a, b)
        return out.numpy() if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": dtype.name, "to_host": to_host},
                 answer=lambda: answers.output(tf.cast(product(a, b), tf.float32).numpy()))
