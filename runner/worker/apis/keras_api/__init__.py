"""Keras 3 on its TensorFlow, JAX or PyTorch backend (KERAS_BACKEND is set by the executor).

Device, synchronisation and memory counters come from the backend's own native Framework, so a
Keras cell is measured exactly like a native cell of the same backend."""

from __future__ import annotations

import importlib
import os
from typing import Any

from ...protocol import CellSpec
from ... import catalog
from ...catalog import float_base
from .. import FrameworkBase


class Framework(FrameworkBase):
    name = "keras"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        backend = spec.backend or os.environ.get("KERAS_BACKEND", "tensorflow")
        os.environ["KERAS_BACKEND"] = backend
        # The native Framework configures device, seed and TF32 before Keras touches the runtime.
        native = catalog.api(backend).package          # the backend's own API package
        self.native = importlib.import_module(f"..{native}", __package__).Framework(spec)
        import keras

        self.keras = keras
        self.ops = keras.ops
        if keras.backend.backend() != backend:
            raise RuntimeError(f"Keras runs on {keras.backend.backend()!r}, expected {backend!r}")
        keras.utils.set_random_seed(spec.seed)
        # A quantized precision builds the model in its float base, then quantizes it
        # (quantize.py, effective["quantization"]).
        keras.config.set_dtype_policy(float_base(spec.precision))
        self.device = self.native.device
        self.vram_source = self.native.vram_source
        self.compilations_counted = self.native.compilations_counted
        self.effective = dict(self.native.effective)
        self.effective["dtype_policy"] = keras.config.dtype_policy().name
        if self.shards.parallel and backend == "jax":
            self.effective["data_parallel"] = keras_data_parallel(keras, self.native)
        # TensorFlow: the native Framework's MirroredStrategy (data_parallel_scope)

    def data_parallel_scope(self) -> Any:
        return self.native.data_parallel_scope()

    def jit_compile(self) -> Any:
        """The value passed to model.compile(jit_compile=...): True, False or 'auto'."""
        jit = self.spec.jit
        return jit if jit in (True, False, "auto") else True

    def sync(self, out: Any) -> None:
        self.native.sync(out)

    def is_array(self, leaf: Any) -> bool:
        return self.native.is_array(leaf)

    def on_host(self, leaf: Any) -> bool:
        return self.native.on_host(leaf)

    # Arrays through keras.ops (the same code on every backend; see FrameworkBase).

    def compile(self, fn: Any) -> Any:
        """keras.ops has no compile switch outside a model: eager on every backend (the catalog
        makes jit = true not applicable)."""
        self.effective["jit"] = "eager (keras.ops)"
        return fn

    def tensor(self, values: Any) -> Any:
        return self.ops.convert_to_tensor(values, float_base(self.spec.precision))

    def to_host(self, out: Any) -> Any:
        return self.ops.convert_to_numpy(out)

    def to_numpy(self, out: Any) -> Any:
        return self.ops.convert_to_numpy(self.ops.cast(out, "float32"))

    def compilation_count(self) -> int | None:
        return self.native.compilation_count()

    def vram_mb(self):
        return self.native.vram_mb()

    def reset_peak(self) -> None:
        self.native.reset_peak()

    def allocator(self) -> dict[str, Any]:
        return self.native.allocator()

    def in_effect(self) -> dict[str, Any]:
        return self.native.in_effect()

    def metadata(self) -> dict[str, Any]:
        meta = self.native.metadata()
        meta["backend_version"] = meta.pop("framework_version")
        meta.update(framework_name="keras", framework_version=self.keras.__version__,
                    keras_version=self.keras.__version__, keras_backend=self.keras.backend.backend())
        return meta


def keras_data_parallel(keras: Any, native: Any) -> dict[str, Any]:
    """Keras on JAX over several devices: keras.distribution.DataParallel over a DeviceMesh of
    the cell's devices (the native Framework's mesh), set before any model exists: every
    variable is replicated and every batch Keras feeds is sharded along "batch"."""
    devices = [f"{d.platform}:{d.id}" for d in native.sharded.mesh.devices.flat]
    mesh = keras.distribution.DeviceMesh((len(devices),), ["batch"], devices=devices)
    keras.distribution.set_distribution(keras.distribution.DataParallel(device_mesh=mesh))
    return native.shards.facts(
        "keras.distribution.DataParallel", mesh={"batch": len(devices)}, devices=devices,
        all_reduce="XLA collectives (NCCL)" if native.device == "gpu" else "XLA CPU collectives")
