"""Native JAX."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ...protocol import CellSpec
from .. import FrameworkBase, resolve_device, tf32

# JAX's monitoring event for one XLA compilation (jax._src.dispatch.BACKEND_COMPILE_EVENT).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class Framework(FrameworkBase):
    name = "jax"
    vram_source = "jax memory_stats peak_bytes_in_use"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        has_gpu = any(d.platform == "gpu" for d in jax.devices())
        self.device = resolve_device(spec.device, has_gpu)
        self.jax_device = jax.devices("gpu" if self.device == "gpu" else "cpu")[0]
        jax.config.update("jax_default_device", self.jax_device)
        if spec.tf32 is not None:
            # JAX's "default" float32 matmul precision uses TF32 on Ampere+; "highest" is full fp32.
            jax.config.update("jax_default_matmul_precision", "tensorfloat32" if spec.tf32 else "highest")
        self.effective = {
            "device": str(self.jax_device),
            "matmul_precision": str(jax.config.jax_default_matmul_precision or "default"),
            **jax_tf32(self.device, self.jax_device),
        }
        self._compiles = 0
        jax.monitoring.register_event_duration_secs_listener(self._count_compile)
        # A data-parallel cell's mesh (docs/scaling.md); None on one device.
        self.sharded: Any = None
        if self.shards.parallel:
            from ..data_parallel.jax_sharding import mesh_of

            self.sharded = mesh_of(self)
            self.effective["data_parallel"] = self.sharded.facts(self.shards, self.device == "gpu")

    def _count_compile(self, event: str, *args: Any, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self._compiles += 1

    compilations_counted = "XLA compilations (jax.monitoring backend-compile events)"

    def compilation_count(self) -> int | None:
        return self._compiles

    def compile(self, fn: Any, donate_argnums: tuple[int, ...] = ()) -> Any:
        """False → op-by-op dispatch; True / 'auto' → jax.jit, donating the arguments named
        (their buffers reused for the outputs: the tuned tier's `donate`)."""
        if self.spec.jit is False:
            self.effective["jit"] = "eager (op-by-op)"
            return fn
        self.effective["jit"] = "jax.jit"
        if donate_argnums:
            self.effective["donate_argnums"] = list(donate_argnums)
        return jax.jit(fn, donate_argnums=donate_argnums)

    def sync(self, out: Any) -> None:
        jax.block_until_ready(out)

    def is_array(self, leaf: Any) -> bool:
        return isinstance(leaf, jax.Array)

    def on_host(self, leaf: Any) -> bool:
        return all(d.platform == "cpu" for d in leaf.devices())

    ops = jnp

    def tensor(self, values: Any) -> Any:
        return jax.device_put(jnp.asarray(values, DTYPES[self.spec.precision]))

    def to_host(self, out: Any) -> np.ndarray:
        return np.asarray(out)

    def to_numpy(self, out: Any) -> np.ndarray:
        return np.asarray(out, np.float32)

    def _stats(self) -> dict[str, Any]:
        try:
            return self.jax_device.memory_stats() or {}
        except Exception:
            return {}

    def vram_mb(self) -> tuple[float, float] | None:
        if self.device != "gpu":
            return None
        stats = self._stats()
        if "bytes_in_use" not in stats:
            return None
        return stats["bytes_in_use"] / 2**20, stats.get("peak_bytes_in_use", 0) / 2**20

    def allocator(self) -> dict[str, Any]:
        keys = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "XLA_PYTHON_CLIENT_ALLOCATOR")
        out: dict[str, Any] = {k: os.environ.get(k) for k in keys}
        stats = self._stats()
        if "bytes_limit" in stats:
            out["bytes_limit_mb"] = stats["bytes_limit"] / 2**20
        return out

    def metadata(self) -> dict[str, Any]:
        import jaxlib

        meta: dict[str, Any] = {
            "framework_name": "jax",
            "framework_version": jax.__version__,
            "jaxlib_version": jaxlib.__version__,
            "jax_backend": jax.default_backend(),
        }
        if self.device == "gpu":
            try:
                from jax._src.lib import cuda_versions  # the versions JAX actually loaded

                if cuda_versions is not None:
                    meta["cuda_version"] = str(cuda_versions.cuda_runtime_get_version())
                    meta["cudnn_version"] = str(cuda_versions.cudnn_get_version())
            except Exception:
                pass
        return meta


def jax_tf32(device: str, jax_device: Any) -> dict[str, Any]:
    """effective tf32 and tf32_detail: JAX's default precision setting (dots and convolutions
    alike) and the GPU's compute capability (TF32 from sm_80)."""
    setting = jax.config.jax_default_matmul_precision
    allowed = tf32.jax_precision_allows_tf32(setting)
    effective, detail = tf32.decide(
        gpu=device == "gpu", capability=getattr(jax_device, "compute_capability", None),
        matmul=allowed, conv=allowed,
        flags={"jax_default_matmul_precision": None if setting is None else str(setting)})
    return {"tf32": effective, "tf32_detail": detail}
