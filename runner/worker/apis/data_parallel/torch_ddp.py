"""torch's data-parallel cells: DistributedDataParallel with one process per device, started by
the worker itself (runner/worker/ranks.py: this process is one rank), NCCL on GPUs and gloo on
a CPU (docs/scaling.md).

Each rank trains its share of the global batch (Shards.own of the same seeded order), DDP
all-reduces the gradients in backward. The clock (bench.StepClock): after each block, every
rank synchronises its device and meets the others at a barrier, then rank 0 reads the clock and
every rank takes rank 0's reading (`agree`), so all make the same decisions and the same calls.
A loss is the mean over the ranks: the global batch's loss, as one device computes it.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch
import torch.distributed as dist

from .. import TorchFramework

# How long a collective may wait for the other ranks before it fails (ranks.py ends the cell
# sooner where a rank fails; the executor's timeout ends everything besides).
TIMEOUT_S = 900
TIMING = ("a barrier of every rank after each block's device synchronisation, then rank 0's "
          "clock, which every rank takes (one all-reduce, outside the samples)")


def start(fw: TorchFramework) -> None:
    """Join the cell's process group as this rank, on this rank's GPU (or the CPU: gloo), and
    make the framework's sync, clock agreement and loss the cell's."""
    shards, gpu = fw.shards, fw.device == "gpu"
    if gpu:
        if torch.cuda.device_count() < shards.devices:
            raise RuntimeError(f"devices = {shards.devices} but this process sees "
                               f"{torch.cuda.device_count()} GPUs")
        torch.cuda.set_device(shards.rank)
        fw.torch_device = torch.device(f"cuda:{shards.rank}")
    backend = "nccl" if gpu else "gloo"
    dist.init_process_group(backend, rank=shards.rank, world_size=shards.devices,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    fw.effective["device"] = str(fw.torch_device)
    fw.effective["data_parallel"] = shards.facts(
        "torch.nn.parallel.DistributedDataParallel", all_reduce=dist.get_backend(),
        processes=shards.devices, launcher="the worker (one process per device)",
        threads_per_rank=torch.get_num_threads(), clock=TIMING)


def wrap(fw: TorchFramework, module: torch.nn.Module) -> torch.nn.Module:
    """The module as DDP trains it (itself in a one-process cell)."""
    if not fw.shards.parallel:
        return module
    ids = [fw.shards.rank] if fw.device == "gpu" else None
    return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)


def _scalar(fw: TorchFramework, value: float) -> torch.Tensor:
    device = fw.torch_device if fw.device == "gpu" else torch.device("cpu")
    return torch.tensor([value], dtype=torch.float64, device=device)


def barrier() -> None:
    """Every rank here (after its device is synchronised): the end of a block on every device."""
    dist.barrier()


def agree(fw: TorchFramework) -> Any:
    """Rank 0's reading on every rank (an all-reduce of it and zeros)."""
    def agreed(seconds: float) -> float:
        value = _scalar(fw, seconds if fw.shards.rank == 0 else 0.0)
        dist.all_reduce(value)
        return float(value.item())

    return agreed


def mean_over_ranks(fw: TorchFramework, value: Any) -> float:
    total = _scalar(fw, float(value))
    dist.all_reduce(total)
    return float(total.item()) / fw.shards.devices
