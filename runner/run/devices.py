"""Data-parallel cells on the run's machine (the devices axis; docs/scaling.md): how many lanes
a cell holds at once, and which cells ask for more devices than the machine has (planned
"not applicable", with the reason, before anything runs).

A cell on the GPU with devices = N holds N GPUs of one machine: N lanes of this host (one per
GPU, joined by scheduling.Lanes), or N GPUs of one Ray node (the task asks Ray for them). A cell
on the CPU runs its N devices as virtual ones on the CPU lane, alone, one core each at least.
"""

from __future__ import annotations

import dataclasses
import os

from ..schema.matrix import Cell
from ..worker import catalog
from .setup import Setup


def on_gpu(setup: Setup, cell: Cell) -> bool:
    """Whether the cell's devices are GPUs: it does not ask for the CPU and the run has GPU
    lanes (this host's GPUs, or a Ray cluster with GPUs)."""
    if cell.axes.device == "cpu":
        return False
    lanes, _ = setup.lanes()
    if lanes[0].local:
        return lanes[0].gpu is not None
    return bool((setup.executor.cluster() or {}).get("gpus"))


def width(setup: Setup, cell: Cell) -> int:
    """Lanes the cell holds at once: one per GPU it computes on; a CPU cell one (alone)."""
    return cell.axes.devices if on_gpu(setup, cell) else 1


def capacity(setup: Setup, cell: Cell) -> tuple[int, str]:
    """(the most devices one cell of this kind can have in this run, what that is)."""
    lanes, _ = setup.lanes()
    cluster = setup.executor.cluster()
    if on_gpu(setup, cell):
        if lanes[0].local:
            return len(lanes), f"the run's GPU lanes ({len(lanes)} of this host's GPUs)"
        largest = max((n["gpus"] for n in (cluster or {}).get("nodes", [])), default=0)
        return largest, "GPUs on the Ray cluster's largest node"
    if cluster is not None:
        cores = int(cluster.get("cpus_per_node") or 1)
        return cores, "CPUs on the Ray cluster's smallest node (virtual devices)"
    cores = os.cpu_count() or 1
    return cores, "this host's CPU cores (one per virtual device)"


def fit_to_machine(setup: Setup, cells: list[Cell]) -> list[Cell]:
    """The cells, those that ask for more devices than this run has, or that cannot run on the
    CPU where device = "auto" puts them there, made not applicable with the reason (a valid
    matrix on a smaller machine)."""
    out = []
    for cell in cells:
        wanted = cell.axes.devices
        if wanted > 1 and not cell.not_applicable:
            most, what = capacity(setup, cell)
            if wanted > most:
                cell = dataclasses.replace(cell, not_applicable=(
                    f"devices = {wanted}, but this run has {most}: {what}"))
        why = on_the_cpu_only(setup, cell)
        out.append(dataclasses.replace(cell, not_applicable=why) if why else cell)
    return out


def on_the_cpu_only(setup: Setup, cell: Cell) -> str | None:
    """device = "auto" in a run without a GPU runs the cell on the CPU: what the catalog's rules
    say of the CPU holds for it (torchao's int4 and float8 need CUDA, say), NA with the reason
    before anything runs rather than a cell that fails."""
    if cell.not_applicable or cell.axes["device"] != "auto" or on_gpu(setup, cell):
        return None
    workload = cell.user_workload.workload if cell.user_workload is not None else cell.workload
    reason = catalog.not_applicable_reason(workload, cell.api, cell.backend,
                                           {**cell.axes, "device": "cpu"}, cell.task,
                                           cell.batch_size, cell.options)
    return f"{reason} (device = \"auto\", and this run has no GPU)" if reason else None
