"""Native PyTorch."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from ... import tuning
from ...protocol import CellSpec
from .. import FrameworkBase, resolve_device, tf32

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class Framework(FrameworkBase):
    name = "torch"
    vram_source = "torch.cuda.max_memory_allocated"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        torch.manual_seed(spec.seed)
        self.device = resolve_device(spec.device, torch.cuda.is_available())
        self.torch_device = torch.device("cuda:0" if self.device == "gpu" else "cpu")
        if spec.tf32 is not None:             # both paths: matmuls (cuBLAS) and convolutions
            torch.backends.cuda.matmul.allow_tf32 = bool(spec.tf32)
            torch.backends.cudnn.allow_tf32 = bool(spec.tf32)
        self.effective = {"device": str(self.torch_device), **torch_tf32(self.device)}
        if self.shards.parallel:              # one process per device (docs/scaling.md)
            from ..data_parallel import torch_ddp as ddp

            ddp.start(self)
            self.agree = ddp.agree(self)

    compilations_counted = "torch._dynamo graphs compiled (0 without torch.compile)"

    def compilation_count(self) -> int | None:
        if "torch._dynamo" not in sys.modules:     # never imported: nothing was compiled
            return 0
        try:
            from torch._dynamo.utils import counters
        except ImportError:
            return None
        return int(counters["stats"]["unique_graphs"])

    def compile(self, fn: Any) -> Any:
        """Apply the jit axis: False/'auto' → eager, True → torch.compile(), a mode name →
        torch.compile(mode=...). Records what is in effect."""
        jit = self.spec.jit
        if jit in (False, "auto"):
            self.effective["jit"] = "eager"
            return fn
        mode = None if jit is True else jit
        fullgraph = bool(tuning.knob(self.spec, "fullgraph"))     # a tuned tier's knob
        self.effective["jit"] = f"torch.compile(mode={mode!r}" + \
            (", fullgraph=True)" if fullgraph else ")")
        return torch.compile(fn, mode=mode, fullgraph=fullgraph)

    def optimizer_options(self) -> dict[str, Any]:
        """Keyword arguments for an Adam or AdamW: fused=True where the cell is tuned to the
        fused update (the tuned tier's `fused_optimizer`), else torch's default path."""
        if not tuning.knob(self.spec, "fused_optimizer", False):
            return {}
        self.effective["optimizer_fused"] = True
        return {"fused": True}

    def sync(self, out: Any) -> None:
        if self.device == "gpu":
            torch.cuda.synchronize()
        if self.shards.parallel:              # every rank's block done before rank 0's clock
            from ..data_parallel import torch_ddp as ddp

            ddp.barrier()

    def is_array(self, leaf: Any) -> bool:
        return bool(torch.is_tensor(leaf))

    def on_host(self, leaf: Any) -> bool:
        return leaf.device.type == "cpu"

    def mean_over_ranks(self, value: Any) -> float:
        if not self.shards.parallel:
            return float(value)
        from ..data_parallel import torch_ddp as ddp

        return ddp.mean_over_ranks(self, value)

    def in_effect(self) -> dict[str, Any]:
        """cuDNN's autotuner and determinism as the cell ran (a workload or Keras may set them):
        benchmark = True picks each convolution's fastest algorithm by timing them on first use
        (a faster steady state, a slower first step), so two torch CNN cells compare only with
        the same setting."""
        return {"cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "cudnn_deterministic": bool(torch.backends.cudnn.deterministic)}

    ops = torch

    def tensor(self, values: Any) -> torch.Tensor:
        return torch.from_numpy(values).to(self.torch_device, DTYPES[self.spec.precision])

    def to_host(self, out: torch.Tensor) -> torch.Tensor:
        return out.cpu()

    def to_numpy(self, out: torch.Tensor) -> Any:
        return out.float().cpu().numpy()

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


def torch_tf32(device: str) -> dict[str, Any]:
    """effective tf32 and tf32_detail from torch's two flags and the GPU's capability."""
    capability = torch.cuda.get_device_capability(0) if device == "gpu" else None
    matmul = bool(torch.backends.cuda.matmul.allow_tf32)
    conv = bool(torch.backends.cudnn.allow_tf32)
    effective, detail = tf32.decide(
        gpu=device == "gpu", capability=capability, matmul=matmul, conv=conv,
        flags={"torch.backends.cuda.matmul.allow_tf32": matmul,
               "torch.backends.cudnn.allow_tf32": conv,
               "float32_matmul_precision": torch.get_float32_matmul_precision()})
    return {"tf32": effective, "tf32_detail": detail,
            "float32_matmul_precision": torch.get_float32_matmul_precision()}
