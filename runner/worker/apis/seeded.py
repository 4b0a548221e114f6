"""The seeded inputs every API takes: the same NumPy arrays, whatever the framework, so that
every environment of a row computes on identical numbers and their answers can be compared
(runner/worker/apis/answers.py). A framework's own generator (torch.randn, jax.random,
tf.random) would draw other numbers from the same seed."""

from __future__ import annotations

import numpy as np


def normal(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Standard-normal float32 arrays of these shapes, drawn in order from one generator."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
