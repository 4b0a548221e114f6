"""Native PyTorch."""

from __future__ import annotations

import os
from typing import Any

import torch

from .. import FrameworkBase, resolve_device

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class Framework(FrameworkBase):
    name = "torch"
    vram_source = "torch.cuda.max_memory_allocated"

    def __init__(self, spec):
        super().__init__(spec)
        torch.manual_seed(spec.seed)
        self.device = resolve_device(spec.device, torch.cuda.is_available())
        self.torch_device = torch.device("cuda:0" if self.device == "gpu" else "cpu")
        if spec.tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = bool(spec.tf32)
            torch.backends.cudnn.allow_tf32 = bool(spec.tf32)
        self.effective = {
            "device": str(self.torch_device),
            "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }

    def compile(self, fn: Any) -> Any:
        """Apply the jit axis: False/'auto' → eager, True → torch.compile(), a mode name →
        torch.compile(mode=...). Records what is in effect."""
        jit = self.spec.jit
        if jit in (False, "auto"):
            self.effective["jit"] = "eager"
            return fn
        mode = None if jit is True else jit
        self.effective["jit"] = f"torch.compile(mode={mode!r})"
        return torch.compile(fn, mode=mode)

    def sync(self, out: Any) -> None:
        if self.device == "gpu":
            torch.cuda.synchronize()

    def vram_mb(self) -> tuple[float, float] | None:
        if self.device != "gpu":
            return None
        return (torch.cuda.memory_allocated() / 2**20, torch.cuda.max_memory_allocated() / 2**20)

    def reset_peak(self) -> None:
        if self.device == "gpu":
            torch.cuda.reset_peak_memory_stats()

    def allocator(self) -> dict[str, Any]:
        out: dict[str, Any] = {"PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
        if self.device == "gpu":
            out["max_memory_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
        return out

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "framework_name": "torch",
            "framework_version": torch.__version__,
            "cuda_version": torch.version.cuda,
            "torch_num_threads": torch.get_num_threads(),
        }
        if torch.backends.cudnn.is_available():
            meta["cudnn_version"] = str(torch.backends.cudnn.version())
        return meta
