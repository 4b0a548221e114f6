"""One package per framework API: `<api>_api/__init__.py` defines `Framework` (device, sync,
memory counters, metadata, the settings in force), and `<api>_api/<workload>.py` defines
`build(spec: CellSpec, fw: Framework) -> Bench` (its own package's Framework). Every package has
the same shape; see FrameworkBase. The recipes shared by several APIs take the Protocol of what
they ask of a framework: FrameworkBase (the array recipes), KerasFramework, TorchFramework."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Protocol

import numpy as np
from collections.abc import Callable

from ..protocol import GPU_GIVEN_ENV, CellSpec
from ..bench import Bench
from .data_parallel import Shards, shards_of


class FrameworkBase:
    """Shared shape of the per-API Framework classes."""

    name = "base"

    def __init__(self, spec: CellSpec) -> None:
        self.spec = spec
        self.device = "cpu"
        self.effective: dict[str, Any] = {}
        # The cell's devices and its batch's split (apis/data_parallel/); an API that runs
        # data-parallel cells records what it did in effective["data_parallel"].
        self.shards: Shards = shards_of(spec)

    # A cell of one process per device (torch DDP): the clock's agreement on rank 0's readings
    # (bench.StepClock.agree). None: one process.
    agree: Callable[[float], float] | None = None

    def data_parallel_scope(self) -> Any:
        """Where a data-parallel cell's model and optimizer are made (MirroredStrategy's scope);
        a no-op elsewhere."""
        return contextlib.nullcontext()

    def mean_over_ranks(self, value: Any) -> float:
        """A scalar (a loss) as a float: in a cell of one process per device, its mean over
        the ranks (the global batch's loss, as one device would compute it)."""
        return float(value)

    def sync(self, out: Any) -> None:
        """Block until the device has finished computing `out`."""

    def is_array(self, leaf: Any) -> bool:
        """Whether a value a user's step returned is this framework's array (what `sync` can
        wait on); the base: NumPy values (host memory, nothing to wait for)."""
        return isinstance(leaf, (np.ndarray, np.generic, float, int)) and not isinstance(leaf, bool)

    def on_host(self, leaf: Any) -> bool:
        """Whether one of its arrays lives in host memory (a CPU device's)."""
        return True

    def vram_mb(self) -> tuple[float, float] | None:
        """(in use, peak) from the framework's own counters, or None without a GPU."""
        return None

    def reset_peak(self) -> None:
        """Reset the framework's peak-memory counter (before the timed window)."""

    vram_source: str | None = None

    def allocator(self) -> dict[str, Any]:
        return {}

    def metadata(self) -> dict[str, Any]:
        return {}

    def in_effect(self) -> dict[str, Any]:
        """Settings read after the timed window, as they were then (the workload may set them):
        joins `effective` in the record."""
        return {}

    # What compilation_count counts, in words (the record's compilations.counted).
    compilations_counted: str = ""

    def compilation_count(self) -> int | None:
        """The framework's compilations so far in this process (None: it has no counter)."""
        return None

    # --- arrays: what the array workloads' shared recipes (matmul_common.py,
    # elementwise_common.py) ask of a framework; every API that runs them defines these.

    ops: Any = None     # the array namespace: matmul, where, exp

    def compile(self, fn: Any) -> Any:
        """The jit axis applied to a function of arrays, recorded in effective["jit"]."""
        return fn

    def tensor(self, values: Any) -> Any:
        """Seeded float32 NumPy values as this framework's array on its device, in the spec's
        precision."""
        raise NotImplementedError(f"{self.name} runs no array workload")

    def to_host(self, out: Any) -> Any:
        """An output copied to host memory (matmul's to_host option, inside the timed step)."""
        raise NotImplementedError(f"{self.name} runs no array workload")

    def to_numpy(self, out: Any) -> Any:
        """An output as float32 NumPy (for its answer, after the timed loop)."""
        raise NotImplementedError(f"{self.name} runs no array workload")

    def array_effective(self, array: Any, **settings: Any) -> dict[str, Any]:
        """What a recipe records in effect: the array's dtype and the recipe's settings."""
        return {"dtype": str(array.dtype), **settings}


class KerasFramework(Protocol):
    """What the Keras recipes (kerashub/, keras_api/quantize.py, a user's Keras model) ask of a
    framework: keras_api's Framework (Keras 3) and tf_keras_api's (Keras 2) both have it."""

    spec: CellSpec
    device: str
    effective: dict[str, Any]
    keras: Any                        # the keras (or tf_keras) module

    def jit_compile(self) -> Any: ...
    def data_parallel_scope(self) -> Any: ...
    def sync(self, out: Any) -> None: ...
    def compile(self, fn: Any) -> Any: ...


class TorchFramework(Protocol):
    """What the recipes on native PyTorch (huggingface/) ask of a framework: torch_api's
    Framework and hf_api's."""

    spec: CellSpec
    device: str
    effective: dict[str, Any]
    shards: Shards
    torch_device: Any                 # a torch.device

    def compile(self, fn: Any) -> Any: ...
    def sync(self, out: Any) -> None: ...
    def mean_over_ranks(self, value: Any) -> float: ...
    def optimizer_options(self) -> dict[str, Any]: ...


class Workload(Protocol):
    """A workload module (`<api>_api/<workload>.py`, or user_common.py for a user's workload),
    as the worker calls it."""

    def build(self, spec: CellSpec, fw: Any) -> Bench: ...


class NoGpuError(RuntimeError):
    """The cell wants the GPU and the framework cannot see one: status no_gpu."""


def resolve_device(requested: str, has_gpu: bool) -> str:
    """`auto` takes the GPU when one is there; an explicit `gpu` without one is an error (JAX,
    for one, would otherwise fall back to the CPU silently), and so is `auto` where the executor
    gave the worker a GPU (a container's device request, a local worker on a GPU host)."""
    if requested == "auto" and os.environ.get(GPU_GIVEN_ENV) == "1":
        requested = "gpu"
    if requested == "gpu" and not has_gpu:
        given = " although the host has one" if os.environ.get(GPU_GIVEN_ENV) == "1" else ""
        raise NoGpuError(f"device = 'gpu' but the framework sees no GPU in this "
                         f"environment{given} (a CPU-only build, or CUDA libraries it cannot load)")
    if requested == "auto":
        return "gpu" if has_gpu else "cpu"
    return requested
