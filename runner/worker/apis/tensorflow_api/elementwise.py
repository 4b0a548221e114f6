"""SELU over a large array with native TensorFlow: eager, tf.function, or XLA."""

from __future__ import annotations

import tensorflow as tf

from ...bench import Bench
from .. import answers, seeded
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE
from . import DTYPES


def selu(x):
    return SCALE * tf.where(x > 0, x, ALPHA * (tf.exp(x) - 1))


def build(spec, fw) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    dtype = DTYPES[spec.precision]
    (values,) = seeded.normal(spec.seed, (batch, n))
    with tf.device(fw.effective["device"]):
        x = tf.cast(tf.constant(values), dtype)
    fn = fw.compile(selu)
    return Bench(step=lambda: fn(x), sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective={"dtype": dtype.name},
                 answer=lambda: answers.output(tf.cast(fn(x), tf.float32).numpy()))
