"""The tuned tier in a run (docs/tuned.md): each cell with tier = "tuned" takes the knobs its
tuning chose (results/data/tuning.py's tuned.toml) for this machine's GPU model and the
environment's stack — the newest tuning folder of the matrix that has the cell, or those
`--tuning` names — and runs as its defaults cell with those knobs (the worker applies them).
A cell whose API has no knob that applies to it runs its defaults (its tuned cell is its
default, and the report says so); any other without a tuning result is not applicable, with the
command that makes one. The run's manifest keeps where each tuned cell's knobs came from."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..environments import Source
from ..errors import UsageError
from ..results.data import tuning as stored
from ..schema.matrix import Cell
from ..worker import catalog
from ..schema.tuning import TuningSettings
from ..worker.catalog.knobs import BATCH_SIZE, applicable, runnable
from . import devices
from .cells import source_identity
from .setup import Setup

TUNED, DEFAULTS = "tuned", "defaults"


def defaults_twin(cell: Cell) -> Cell:
    """The tuned cell's defaults: the same cell at tier = "defaults" (no knobs)."""
    return dataclasses.replace(cell, axes=cell.axes.replace(tier=DEFAULTS), tuning={})


def gpu_model(setup: Setup, cell: Cell) -> str:
    """What a tuning is keyed by: the GPU model the cell runs on, or "cpu"."""
    if not devices.on_gpu(setup, cell):
        return "cpu"
    lane = setup.lanes()[0][0]
    return (lane.gpu.name if lane.gpu is not None else None) or "gpu"


def stack_of(setup: Setup, source: Source) -> str:
    """The environment's stack as a tuning keys it: its lock's digest or its image reference
    ("" for an existing interpreter, whose packages can change: any stack matches)."""
    return source_identity(setup, source) or ""


def knobs_of(setup: Setup, cell: Cell,
             only: list[str] | None = None) -> list[catalog.Knob]:
    """The knobs of the cell's API that apply to it, on the device it runs on (of `only`, the
    matrix's [tuning] knobs, where it names some)."""
    record = catalog.api(cell.api, cell.backend)
    if only is not None:
        record = dataclasses.replace(record, knobs=tuple(k for k in record.knobs
                                                         if k.name in only))
    workload = cell.user_workload.workload if cell.user_workload is not None \
        else catalog.WORKLOADS[cell.workload]
    device = "gpu" if devices.on_gpu(setup, cell) else "cpu"
    return runnable(applicable(record, workload, cell.task, cell.axes, device), device,
                    workload, cell.api, cell.backend, cell.axes, cell.task, cell.batch_size,
                    cell.options)


def batch_searched(settings: TuningSettings, cell: Cell) -> bool:
    """Whether the tuning searches the cell's batch ([tuning] batch = "max": fit, predict and
    run cells; catalog/knobs.py BATCH_SIZE)."""
    return settings.batch == "max" and cell.task in BATCH_SIZE.tasks


def found_tunings(folders: list[Path], results_dir: Path, name: str) -> list[dict[str, Any]]:
    """Every tuned.toml to look in, first match wins: `--tuning` folders in their order, else
    the matrix's tuning folders, newest first."""
    chosen = folders or stored.tuning_folders(results_dir, name)
    out = []
    for folder in chosen:
        if folders and not (Path(folder) / stored.TUNED).is_file():
            raise UsageError(f"--tuning {folder}: no {stored.TUNED} (a folder `python -m "
                             "runner tune` wrote)")
        out.append(stored.read_tuned(Path(folder)))
    return out


def attach(setup: Setup, cells: list[Cell], folders: list[Path], results_dir: Path,
           run_name: str, matrix_path: Path, settings: TuningSettings
           ) -> tuple[list[Cell], dict[str, dict[str, Any]]]:
    """The cells with each tuned one given its knobs (or made not applicable), and, per tuned
    cell id, where its knobs came from (the manifest's `tuning`); `settings`: [tuning]."""
    if not any(c.axes.tier == TUNED for c in cells):
        return cells, {}
    tunings = found_tunings(folders, results_dir, run_name)
    out, sources = [], {}
    for cell in cells:
        if cell.axes.tier != TUNED or cell.not_applicable:
            out.append(cell)
            continue
        twin = defaults_twin(cell)
        if not knobs_of(setup, twin, settings.knobs) and not batch_searched(settings, twin):
            out.append(cell)
            sources[cell.id] = {"status": stored.NO_KNOBS, "knobs": {}}
            continue
        gpu, stack = gpu_model(setup, twin), stack_of(setup, setup.source_of(twin))
        entry = next((t[twin.name] for t in tunings if twin.name in t
                      and t[twin.name].matches(gpu, stack)), None)
        if entry is None:
            out.append(dataclasses.replace(cell, not_applicable=(
                f"no tuning of {twin.name} for {gpu} and this stack: python -m runner tune "
                f"{matrix_path} --only '{twin.name}'")))
            continue
        tuned = dataclasses.replace(cell, tuning=dict(entry.knobs))
        out.append(tuned)
        sources[tuned.id] = {"status": entry.status, "knobs": dict(entry.knobs),
                             "source": entry.source, "probes": entry.probes,
                             "minutes": entry.minutes, "budget_minutes": entry.budget_minutes,
                             "usd": entry.usd,
                             "probe_gain": entry.probe_gain}
    return out, sources
