"""The matmul workload multiplies plain n×n matrices at batch 1 and (batch, n, n) stacks only for
several products (issue 37: TensorFlow's CPU batched-matmul kernel took 234 ms on (1, 3000, 3000)
where its 2-D one took 130 ms, so the runner read 1.55× a `%timeit` of the study's snippet).
Checked with the NumPy API, which the host's interpreter has; every API shares the recipe."""

from __future__ import annotations

import numpy as np
import pytest

from runner.worker.apis import matmul_common, seeded
from runner.worker.apis.numpy_api import Framework
from runner.worker.protocol import CellSpec


def spec(batch: int) -> CellSpec:
    return CellSpec(run_id="r", cell_id="c", cell_name="matmul", repeat=1, environment="numpy",
                    api="numpy", backend=None, image="numpy", workload="matmul", task="run",
                    batch_size=batch, precision="float32", jit="auto", size="tiny", tf32=None,
                    steps_per_execution=1, data="device", device="cpu", options={"n": 8},
                    steps=3, warmup_steps=1, seed=5, result_path="")


def test_one_product_is_two_dimensional():
    bench = matmul_common.build(spec(1), Framework(spec(1)))
    out = bench.step()
    assert out.shape == (8, 8)
    assert bench.effective["operands"] == "2-D (n, n)"
    a, b = seeded.normal(5, (8, 8), (8, 8))
    assert np.array_equal(out, a @ b)


@pytest.mark.parametrize("batch", [2, 3])
def test_several_products_keep_the_batched_form(batch):
    bench = matmul_common.build(spec(batch), Framework(spec(batch)))
    assert bench.step().shape == (batch, 8, 8)
    assert bench.effective["operands"] == f"batched ({batch}, n, n)"
    assert bench.flops_per_step == 2.0 * batch * 8**3


def test_batch_one_multiplies_the_numbers_a_batch_would_start_with():
    """The same seeded numbers in both forms: the 2-D product is the first of a batch's."""
    one = matmul_common.build(spec(1), Framework(spec(1))).step()
    a, b = seeded.normal(5, (1, 8, 8), (1, 8, 8))
    assert np.array_equal(one, (a @ b)[0])
