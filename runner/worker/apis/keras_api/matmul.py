"""n×n matrix product through keras.ops (the same code on every Keras 3 backend)."""

from __future__ import annotations

from ...bench import Bench
from .. import answers, seeded


def build(spec, fw) -> Bench:
    ops = fw.keras.ops
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    a, b = (ops.convert_to_tensor(x, spec.precision)
            for x in seeded.normal(spec.seed, (batch, n, n), (batch, n, n)))
    fw.effective["jit"] = "eager (keras.ops)"

    def step():
        out = ops.matmul(a, b)
        return ops.convert_to_numpy(out) if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=2.0 * batch * n**3,
                 effective={"dtype": str(a.dtype), "to_host": to_host},
                 answer=lambda: answers.output(
                     ops.convert_to_numpy(ops.cast(ops.matmul(a, b), "float32"))))
