"""The keras-hub cells' seeded weights in a Hugging Face model: every weight keras-hub's model
redraws (apis/kerashub/inputs.py seeded_weights: normal / √fan-in, from a generator seeded by the
run's seed and the weight's Keras path) drawn again here from the same path and Keras shape, then
laid out as the Hugging Face tensor of the same role (a transposed kernel, heads flattened). The
weights keras-hub keeps (zero biases, unit or zero norm scales) are what Hugging Face initialises
them to already. With identical weights and inputs, the same-answer check compares an hf cell
with the Keras cells of its row.

A model's map is a list of Transplant entries, written in its hf_api module (BERT, Gemma,
Mistral); SAM and Stable Diffusion 3 have none (their modules say why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

import numpy as np
import torch

from ..kerashub.inputs import seeded_draw


@dataclass(frozen=True)
class Transplant:
    keras_path: str                  # the Keras variable's path in the keras-hub model
    keras_shape: tuple[int, ...]
    parameter: str                   # the Hugging Face parameter's name (named_parameters)
    layout: Callable[[np.ndarray], np.ndarray]   # Keras layout → Hugging Face layout


def transposed(array: np.ndarray) -> np.ndarray:
    """A dense kernel (in, out) → a Linear weight (out, in)."""
    return array.T


def same(array: np.ndarray) -> np.ndarray:
    return array


def heads_in(array: np.ndarray) -> np.ndarray:
    """An EinsumDense kernel (in, heads, head_dim) → a Linear weight (heads·head_dim, in)."""
    return array.reshape(array.shape[0], -1).T


def heads_first_in(array: np.ndarray) -> np.ndarray:
    """Gemma's kernel (heads, in, head_dim) → a Linear weight (heads·head_dim, in)."""
    return array.transpose(0, 2, 1).reshape(-1, array.shape[1])


def heads_out(array: np.ndarray) -> np.ndarray:
    """An attention output kernel (heads, head_dim, out) → a Linear weight (out, heads·head_dim)."""
    return array.reshape(-1, array.shape[-1]).T


def transplant(model: torch.nn.Module, entries: list[Transplant], seed: int) -> dict[str, Any]:
    """Draw every entry's weight and copy it into the model's parameter (before the model is
    moved to its device and dtype; a tied weight is written once). Returns the counts; a
    parameter the map does not name keeps Hugging Face's initial value, which must be constant
    (checked: a random one would make the answers differ without saying why)."""
    parameters = dict(model.named_parameters())
    written = set()
    with torch.no_grad():
        for entry in entries:
            target = parameters[entry.parameter]
            value = np.ascontiguousarray(entry.layout(
                seeded_draw(seed, entry.keras_path, entry.keras_shape)))
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(f"{entry.keras_path} {entry.keras_shape} → {entry.parameter}: "
                                 f"{value.shape} for {tuple(target.shape)}")
            target.copy_(torch.from_numpy(value))
            written.add(entry.parameter)
    random = [name for name, p in parameters.items() if name not in written
              and p.numel() > 1 and float(p.detach().float().std()) > 0]
    if random:
        raise ValueError(f"weights left at a random initial value: {random[:5]}")
    return {"redrawn": len(written), "kept": len(parameters) - len(written)}
