"""The elementwise workload, written once for every API: SELU (Klambauer et al., 2017) over a
batch_size × n array, eager op-by-op or compiled (the jit axis). The inputs (seeded NumPy arrays),
the FLOPs and the answer are here; each API's Framework supplies its arrays, operations and
compiler (see matmul_common.py); an API runs it where its record names this module for
elementwise (catalog/apis.py)."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from ..protocol import CellSpec
from . import FrameworkBase
from ..bench import Bench
from . import answers, seeded

ALPHA = 1.6732632423543772
SCALE = 1.0507009873554805
# Counted as compare, exp, subtract, multiply by alpha, multiply by scale (exp as one operation).
FLOPS_PER_ELEMENT = 5


def selu_with(ops: Any) -> Callable[[Any], Any]:
    """SELU written with an API's array operations (where, exp)."""

    def selu(x):
        return SCALE * ops.where(x > 0, x, ALPHA * (ops.exp(x) - 1))

    return selu


def build(spec: CellSpec, fw: FrameworkBase) -> Bench:
    n, batch = spec.options["n"], spec.batch_size
    (values,) = seeded.normal(spec.seed, (batch, n))
    x = fw.tensor(values)
    fn = fw.compile(selu_with(fw.ops))
    return Bench(step=lambda: fn(x), sync=fw.sync, items_per_step=batch * n,
                 flops_per_step=FLOPS_PER_ELEMENT * batch * n, effective=fw.array_effective(x),
                 answer=lambda: answers.output(fw.to_numpy(fn(x))))
