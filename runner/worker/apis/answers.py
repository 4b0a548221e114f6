"""Answers: a small fingerprint of what a cell computed on its seeded inputs, recorded in the
result's `answer` field; the host compares the fingerprints of a row's environments with a
tolerance set by the precision (runner/results/answers.py). Standard library and NumPy only.

A fingerprint is a flat dict of named quantities (float, list of floats, or token ids as a list
of lists of ints), or groups of them (a dict whose "rms" is the scale its other numbers are
compared against). Keep it small: a few numbers that a wrong scale, a dtype policy not applied,
a transposed layout or a different loss reduction would move.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# Leading values recorded from a list (logits) and tokens per generated sequence.
HEAD = 20
TOKENS = 8
SEQUENCES = 2
CHUNK = 1 << 20           # values converted to float64 at a time


def leaves(structure: Any) -> list[np.ndarray]:
    """Every array of a nested output (dicts in key order, lists and tuples in order)."""
    if isinstance(structure, dict):
        return [a for key in sorted(structure) for a in leaves(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [a for item in structure for a in leaves(item)]
    return [np.asarray(structure)]


def output(structure: Any) -> dict[str, Any]:
    """Norms of an output (every array of it together), accumulated in float64 a chunk at a time
    (no float64 copy of a large output): {"output": {rms, mean, max_abs}}, or {"output":
    {"non_finite": count}} when it holds NaN or infinity."""
    count, total, squares, largest, bad = 0, 0.0, 0.0, 0.0, 0
    for array in leaves(structure):
        flat = np.asarray(array).reshape(-1)
        for start in range(0, flat.size, CHUNK):
            chunk = flat[start:start + CHUNK].astype(np.float64)
            finite = np.isfinite(chunk)
            bad += int(chunk.size - np.count_nonzero(finite))
            count += chunk.size
            total += float(chunk.sum())
            squares += float(np.dot(chunk, chunk))
            largest = max(largest, float(np.abs(chunk).max())) if chunk.size else largest
    if bad:
        return {"output": {"non_finite": bad}}
    if not count:
        return {"output": {"values": 0}}
    return {"output": {"rms": math.sqrt(squares / count), "mean": total / count,
                       "max_abs": largest}}


def head(values: Any, count: int = HEAD) -> list[float]:
    """The first `count` values of an array, flattened, as floats."""
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()[:count]]


def tokens(ids: Any, starts: list[int]) -> dict[str, Any]:
    """The first generated token ids of the first sequences, each from its prompt's end."""
    ids = np.asarray(ids)
    return {"tokens": [[int(t) for t in row[start:start + TOKENS]]
                       for row, start in zip(ids[:SEQUENCES], starts, strict=False)]}
