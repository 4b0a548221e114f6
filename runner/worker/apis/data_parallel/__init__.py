"""Data-parallel cells (the devices axis; docs/scaling.md) as every API's worker sees them: how
many devices, the global batch and each device's share of it, which rank this process is, and
what must be set before a framework is imported. Standard library only.

One meaning on every API: the cell's model is trained on `devices` devices at once, each step
on one global batch split evenly between them, the gradients all-reduced, every device holding
the same parameters. Weak scaling (the default) keeps `batch_size` per device, so the global
batch is batch_size × devices (the Keras and PyTorch guides' way); strong scaling keeps
`batch_size` as the global batch. A workload builds its bench for the global batch (the worker
hands it a spec whose batch_size is that), and the API splits it:

- Keras on JAX: keras.distribution.DataParallel over a DeviceMesh of the devices
  (keras_api/__init__.py, on jax_sharding.py's devices);
- Keras on TensorFlow, Keras 2 and native TensorFlow: tf.distribute.MirroredStrategy
  (tf_mirrored.py);
- native JAX: jax.sharding, a Mesh with one "batch" axis, batch sharded, parameters
  replicated (jax_sharding.py);
- native torch (and the hf API): DistributedDataParallel, one process per device launched by
  the worker itself (runner/worker/ranks.py), NCCL on GPUs and gloo on a CPU; rank 0 times and
  reports, every rank's memory is recorded (torch_ddp.py).
- Keras on torch: none (catalog/rules.py says why).

On a CPU the devices are virtual: XLA's host platform split into `devices` devices, TensorFlow's
CPU split into as many logical devices, or as many torch processes (each with its share of the
cores, as torchrun gives each a thread budget).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from ... import catalog
from ...protocol import CellSpec

# torch.distributed's own variables (env:// rendezvous), set by ranks.py for every rank.
RANK_ENV, WORLD_ENV, LOCAL_RANK_ENV = "RANK", "WORLD_SIZE", "LOCAL_RANK"
XLA_DEVICES_FLAG = "--xla_force_host_platform_device_count"


@dataclass(frozen=True)
class Shards:
    """The devices of one cell and how its batch is split (rank: this process's, torch DDP)."""

    devices: int
    scaling: str
    batch_size: int              # the matrix's
    rank: int = 0

    @property
    def parallel(self) -> bool:
        return self.devices > 1

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.devices if self.scaling == "weak" else self.batch_size

    @property
    def per_device(self) -> int:
        return self.global_batch // self.devices

    def own(self, rows: Any) -> Any:
        """This rank's rows of a global batch (an array, or anything sliced along its first
        axis)."""
        return rows[self.rank * self.per_device:(self.rank + 1) * self.per_device]

    def facts(self, strategy: str, **more: Any) -> dict[str, Any]:
        """effective.data_parallel: what ran (strategy, world size, the batches, ...)."""
        return {"strategy": strategy, "world_size": self.devices, "scaling": self.scaling,
                "global_batch": self.global_batch, "per_device_batch": self.per_device, **more}


def process_per_device(spec: CellSpec) -> bool:
    """A data-parallel cell of an engine that runs one process per device (torch's DDP); the
    others run one process."""
    engine = catalog.api(spec.api, spec.backend).engine_record
    return spec.devices > 1 and engine is not None and engine.process_per_device


def shards_of(spec: CellSpec) -> Shards:
    rank = int(os.environ.get(RANK_ENV, "0")) if process_per_device(spec) else 0
    return Shards(spec.devices, spec.scaling, spec.batch_size, rank)


def global_spec(spec: CellSpec) -> CellSpec:
    """The spec a workload builds its bench from: batch_size is the global batch (its items per
    step), which the API splits over the devices."""
    shards = shards_of(spec)
    if not shards.parallel:
        return spec
    return dataclasses.replace(spec, batch_size=shards.global_batch)


def threads_per_rank(devices: int) -> int:
    """CPU threads each DDP process may use: its share of the cores (torchrun sets one)."""
    return max(1, (os.cpu_count() or 1) // devices)


def prepare_environment(spec: CellSpec) -> None:
    """What must be set before the framework is imported: XLA's host platform split into the
    cell's devices (JAX; GPUs are what CUDA_VISIBLE_DEVICES shows, the lane's), each DDP
    process's thread budget (torch)."""
    if spec.devices <= 1:
        return
    engine = catalog.api(spec.api, spec.backend).engine_record
    if engine is None:
        return
    if engine.xla_host_devices:
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
                 if not f.startswith(XLA_DEVICES_FLAG)]
        os.environ["XLA_FLAGS"] = " ".join([*flags, f"{XLA_DEVICES_FLAG}={spec.devices}"])
    if engine.process_per_device:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_rank(spec.devices)))
