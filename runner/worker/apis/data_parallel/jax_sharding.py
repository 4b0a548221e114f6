"""Native JAX's data-parallel cells (docs/scaling.md): jax.sharding over a Mesh of the cell's
devices with one axis, "batch". A step's global batch is sharded along it, the parameters and
optimizer state are replicated on every device, and the jitted step is partitioned by XLA, which
all-reduces the gradients (NCCL on GPUs, its CPU collectives on a CPU's virtual devices).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .. import FrameworkBase

AXIS = "batch"


class Sharded:
    """The mesh of one cell, and its two placements."""

    def __init__(self, devices: list[Any]):
        self.mesh = Mesh(np.array(devices), (AXIS,))
        self.batch = NamedSharding(self.mesh, PartitionSpec(AXIS))    # split along axis 0
        self.replicated = NamedSharding(self.mesh, PartitionSpec())

    def facts(self, shards: Any, gpu: bool) -> dict[str, Any]:
        return shards.facts(
            "jax.sharding (NamedSharding: batch sharded, parameters replicated)",
            mesh={AXIS: len(self.mesh.devices)},
            devices=[str(d) for d in self.mesh.devices.flat],
            all_reduce="XLA collectives (NCCL)" if gpu else "XLA CPU collectives")

    def gather(self) -> Any:
        """rows[indices] computed on the devices, each its own share of the batch (the rows
        replicated, the indices too): no step copies from the host."""
        return jax.jit(lambda rows, indices: rows[indices], out_shardings=self.batch)


def mesh_of(fw: FrameworkBase) -> Sharded:
    """The cell's devices (the lane's GPUs, or the CPU's virtual devices: XLA_FLAGS, set by
    the worker before JAX was imported)."""
    kind = "gpu" if fw.device == "gpu" else "cpu"
    found = jax.devices(kind)
    wanted = fw.shards.devices
    if len(found) < wanted:
        raise RuntimeError(f"devices = {wanted} but JAX sees {len(found)} {kind} device(s)")
    return Sharded(found[:wanted])
