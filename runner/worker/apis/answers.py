"""Answers: a small fingerprint of what a cell computed on its seeded inputs, recorded in the
result's `answer` field; the host compares the fingerprints of a row's environments with a
tolerance set by the precision (runner/results/answers.py). Standard library and NumPy only.

A fingerprint is a flat dict of named quantities (float, list of floats, or token ids as a list
of lists of ints), or groups of them (a dict whose "rms" is the scale its other numbers are
compared against). Keep it small: a few numbers that a wrong scale, a dtype policy not applied,
a transposed layout or a different loss reduction would move.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Leading values recorded from a list (logits) and tokens per generated sequence.
HEAD = 20
TOKENS = 8
SEQUENCES = 2


def leaves(structure: Any) -> list[np.ndarray]:
    """Every array of a nested output (dicts in key order, lists and tuples in order)."""
    if isinstance(structure, dict):
        return [a for key in sorted(structure) for a in leaves(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [a for item in structure for a in leaves(item)]
    return [np.asarray(structure)]


def output(structure: Any) -> dict[str, Any]:
    """Norms of an output (every array of it together), in float64: {"output": {rms, mean,
    max_abs}}, or {"output": {"non_finite": count}} when it holds NaN or infinity."""
    values = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in leaves(structure)])
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        return {"output": {"non_finite": bad}}
    return {"output": {"rms": float(np.sqrt(np.mean(values * values))),
                       "mean": float(np.mean(values)),
                       "max_abs": float(np.max(np.abs(values)))}}


def head(values: Any, count: int = HEAD) -> list[float]:
    """The first `count` values of an array, flattened, as floats."""
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()[:count]]


def tokens(ids: Any, starts: list[int]) -> dict[str, Any]:
    """The first generated token ids of the first sequences, each from its prompt's end."""
    ids = np.asarray(ids)
    return {"tokens": [[int(t) for t in row[start:start + TOKENS]]
                       for row, start in zip(ids[:SEQUENCES], starts)]}
