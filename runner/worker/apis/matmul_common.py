"""The matmul workload, written once for every API: n×n matrix products, batch_size independent
ones per step. The inputs (seeded NumPy arrays, the same numbers everywhere), the FLOPs and the
answer are here; each API's Framework supplies its arrays and operations (FrameworkBase's array
methods: ops, tensor, compile, to_host, to_numpy, array_effective); an API runs it where its
record names this module for matmul (catalog/apis.py).

At batch 1 the step is the plain n×n product (2-D operands), as the studies and a `%timeit`
snippet write it; only a batch of several products uses (batch, n, n) operands. A (1, n, n)
product is other code on some frameworks: TensorFlow's CPU batched-matmul kernel took 234 ms
where its 2-D one took 130 ms for n = 3000 (issue 37). `effective.operands` says which ran."""

from __future__ import annotations

from ..protocol import CellSpec
from . import FrameworkBase
from ..bench import Bench
from . import answers, seeded


def flops(n: int, batch: int) -> float:
    """Multiply-adds of `batch` n×n products, counted as two operations each."""
    return 2.0 * batch * n**3


def operand_shape(n: int, batch: int) -> tuple[int, ...]:
    """(n, n) for one product, (batch, n, n) for several: the same seeded numbers either way."""
    return (n, n) if batch == 1 else (batch, n, n)


def build(spec: CellSpec, fw: FrameworkBase) -> Bench:
    n, batch, to_host = spec.options["n"], spec.batch_size, spec.options.get("to_host", False)
    shape = operand_shape(n, batch)
    a, b = (fw.tensor(x) for x in seeded.normal(spec.seed, shape, shape))
    product = fw.compile(fw.ops.matmul)

    def step():
        out = product(a, b)
        return fw.to_host(out) if to_host else out

    operands = "2-D (n, n)" if batch == 1 else f"batched ({batch}, n, n)"
    return Bench(step=step, sync=fw.sync, items_per_step=batch, flops_per_step=flops(n, batch),
                 effective={**fw.array_effective(a, to_host=to_host), "operands": operands},
                 answer=lambda: answers.output(fw.to_numpy(product(a, b))))
