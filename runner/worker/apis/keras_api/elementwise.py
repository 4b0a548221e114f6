"""SELU over a large array through keras.ops (eager on every backend)."""

from __future__ import annotations

import numpy as np

from ...bench import Bench
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE


def build(spec, fw) -> Bench:
    ops = fw.keras.ops
    n, batch = spec.options["n"], spec.batch_size
    x = ops.convert_to_tensor(
        np.random.default_rng(spec.seed).standard_normal((batch, n), dtype=np.float32), spec.precision)
    fw.effective["jit"] = "eager (keras.ops)"

    def selu():
        return SCALE * ops.where(x > 0, x, ALPHA * (ops.exp(x) - 1))

    return Bench(step=selu, sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective={"dtype": str(x.dtype)})
