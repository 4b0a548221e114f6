"""SELU over a large array through keras.ops (eager on every backend)."""

from __future__ import annotations

from ...bench import Bench
from .. import answers, seeded
from ..selu import ALPHA, FLOPS_PER_ELEMENT, SCALE


def build(spec, fw) -> Bench:
    ops = fw.keras.ops
    n, batch = spec.options["n"], spec.batch_size
    (values,) = seeded.normal(spec.seed, (batch, n))
    x = ops.convert_to_tensor(values, spec.precision)
    fw.effective["jit"] = "eager (keras.ops)"

    def selu():
        return SCALE * ops.where(x > 0, x, ALPHA * (ops.exp(x) - 1))

    return Bench(step=selu, sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective={"dtype": str(x.dtype)},
                 answer=lambda: answers.output(ops.convert_to_numpy(ops.cast(selu(), "float32"))))
