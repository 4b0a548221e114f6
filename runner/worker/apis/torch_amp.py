"""Mixed precision on native PyTorch, written once: the precision axis as parameter dtype, compute
dtype and autocast, and torch's AMP training step.

float32: everything in float32. bfloat16: the model and its inputs in bfloat16. mixed_*: float32
parameters, the forward pass and the loss under torch.autocast in the compute dtype; for
mixed_float16 the loss is scaled by a torch.amp.GradScaler (the AMP recipe's default) unless the
cell turns it off. A quantized precision is built in its float base (catalog.float_base).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..catalog import float_base
from .cnn_common import PRECISION_DTYPES

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Precision:
    """The precision axis on a torch device type ("cpu", "cuda")."""

    def __init__(self, device_type: str, precision: str, grad_scaler: bool = True) -> None:
        param, compute = PRECISION_DTYPES[float_base(precision)]
        self.device_type = device_type
        self.param_dtype, self.compute_dtype = DTYPES[param], DTYPES[compute]
        self.mixed = self.param_dtype != self.compute_dtype
        self.scaled = grad_scaler and self.mixed and self.compute_dtype == torch.float16

    def autocast(self) -> Any:
        """The forward pass's context: autocast to the compute dtype, off unless mixed."""
        return torch.autocast(self.device_type, dtype=self.compute_dtype, enabled=self.mixed)

    @property
    def effective(self) -> dict[str, Any]:
        return {"parameter_dtype": str(self.param_dtype),
                "autocast": str(self.compute_dtype) if self.mixed else None}


def training_step(optimizer: Any, precision: Precision,
                  loss_of: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """One training step on a batch: zero_grad, `loss_of(*batch)` (forward and loss) under the
    precision's autocast, backward, optimizer step (through the GradScaler where the precision
    scales). Returns the loss, left on the device (the clock's block synchronises)."""
    scaler = torch.amp.GradScaler(precision.device_type) if precision.scaled else None

    def step(*batch: Any) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            loss = loss_of(*batch)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()

    return step
