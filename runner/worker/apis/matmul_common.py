"""The matmul workload, written once for every API: n×n matrix products, batch_size independent
ones per step. The inputs (seeded NumPy arrays, the same numbers everywhere), the FLOPs and the
answer are here; each API's Framework supplies its arrays and operations (FrameworkBase's array
methods: ops, tensor, compile, to_host, to_numpy, array_effective), and
<api>_api/matmul.py names the API as one that runs it."""

from __future__ import annotations

from ..bench import Bench
from . import answers, seeded


def flops(n: int, batch: int) -> float:
    """Multiply-adds of `batch` n×n products, counted as two operations each."""
    return 2.0 * batch * n**3


def build(spec, fw) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    a, b = (fw.tensor(x) for x in seeded.normal(spec.seed, (batch, n, n), (batch, n, n)))
    product = fw.compile(fw.ops.matmul)

    def step():
        out = product(a, b)
        return fw.to_host(out) if to_host else out

    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=flops(n, batch),
                 effective=fw.array_effective(a, to_host=to_host),
                 answer=lambda: answers.output(fw.to_numpy(product(a, b))))
