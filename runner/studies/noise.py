"""`python -m runner doctor --measure [MATRIX]`: how noisy is this machine, and what may a run
here trust? On this machine, in the matrix's environments:

1. the GPU's state through NVML (runner/machine/gpustate.py): persistence mode, ECC, clocks (held or not,
   applications clocks against their defaults), power limit against its default, temperature,
   power and utilisation at idle, other compute processes;
2. the harness's overhead per environment: one matmul cell per environment whose worker, after
   its timed window, pairs the worker's own clock with a bare loop of the same product in the
   same process (runner.worker.overhead);
3. an A/A run: the same cells run `--runs` times as separate runs through the run machinery
   (fresh processes, the settle wait, the matrix's lock_clocks), giving the run-to-run spread of
   each cell's headline (the median of its repeat medians) per workload class, and the
   `compare` threshold that spread supports.

Written to results/machine-profiles/<host>-<gpu>.json (runner/machine/profile.py), which later
runs on this machine copy into their manifest and `compare` reads; the measuring runs are kept
beside it (results/machine-profiles/<host>-<gpu>/, their output in measure.log)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, user_text
from ..machine import gpustate, profile as machine_profile
from ..paths import RESULTS_DIR
from ..results.analysis.summaries import cell_summaries
from ..results.data.store import Store
from ..results.data.types import CellSummary
from ..results.formatting import fmt
from ..run import pipeline
from ..run.plan import make_plan
from ..run.setup import Setup, choose_setup
from ..schema.axes import Axes
from ..schema.matrix import Cell, Matrix, worker_env
from ..timestamps import iso_now
from ..version import runner_version
from ..worker import catalog, protocol
from . import repeats

DEFAULT_RUNS = 3
OVERHEAD_N = {"gpu": 4096, "cpu": 512}   # the overhead's matmul side: ~1 ms on a GPU or a CPU


def measure(console: Console, matrix_path: Path, *, runs: int = DEFAULT_RUNS,
            only: Sequence[str] = (), profile: str | None = None, executor: str | None = None,
            results_dir: Path | None = None, detect: float = repeats.DEFAULT_DETECT) -> int:
    """doctor --measure: the GPU's state, the overhead, the A/A runs (`runs`, of the cells `only`
    names), the profile under `results_dir`, the repeats that detect `detect` (repeats.py)."""
    if runs < 2:
        raise UsageError(f"--runs {runs}: an A/A run needs at least 2 runs")
    results_dir = results_dir or RESULTS_DIR
    opts = pipeline.Options(matrix_path=matrix_path, only=list(only),
                            profile=profile, executor=executor,
                            results_dir=results_dir, history=False)
    state = pipeline.RunState(opts, console)
    host, gpu = machine_profile.this_machine()
    path = machine_profile.path_for(results_dir, host, gpu)
    with state.cleanup:                     # the setup closed, the clocks reset: however it ends
        pipeline.load_matrix(state)
        matrix, setup = state.matrix, state.setup
        if not setup.executor.on_this_host:
            raise UsageError("doctor --measure measures this machine: use --executor local or "
                             "docker (run it on each kind of node for a Ray cluster)")
        cells = aa_cells(matrix, opts.only)      # bad input stops before anything is measured
        folder = path.with_suffix("")
        folder.mkdir(parents=True, exist_ok=True)
        console.print(f"[bold]machine:[/] {user_text(host)}, {user_text(gpu or 'no GPU')} → "
                      f"{user_text(str(path))}", soft_wrap=True)
        log_path = folder / "measure.log"
        with log_path.open("a", encoding="utf-8") as log_file:
            log = Console(file=log_file, width=200)
            pipeline.lock_clocks(state)
            states = gpu_states(setup)
            show_states(states, matrix, console)
            overhead = measure_overhead(matrix, setup, opts, folder, log, console)
            aa = measure_aa(matrix, cells, setup, opts, runs, folder, log, console)
    measured = {"schema": machine_profile.SCHEMA, "key": machine_profile.profile_key(host, gpu),
                "host": host, "gpu_name": gpu,
                "measured_at": iso_now(),
                "runner_version": runner_version(), "matrix": str(matrix.path),
                "matrix_profile": matrix.profile, "executor": setup.executor.name,
                "clocks_locked": (setup.clocks or {}).get("setting"), "gpus": states,
                "overhead": overhead, "aa": aa, "log": str(log_path)}
    protocol.write_json_atomic(path, measured)
    show_aa(aa, console)
    for line in repeats.lines(aa, detect):
        console.print(user_text(line), soft_wrap=True, highlight=False)
    console.print(f"machine profile: {user_text(str(path))} (runs on this machine read it; "
                  f"log: {user_text(str(log_path))})", soft_wrap=True)
    return EXIT_OK if aa["classes"] else EXIT_FAILED_CELLS


# --- 1. the GPU's state --------------------------------------------------------------------------

def gpu_states(setup: Setup) -> list[dict[str, Any]]:
    """gpustate.gpu_state of every GPU the run's lanes use (none on a CPU host)."""
    states = []
    for device_id in setup.gpu_device_ids():
        nvml = gpustate.open_gpu(device_id)
        if nvml is not None:
            states.append({"gpu": device_id, **gpustate.gpu_state(nvml)})
    return states


def state_notes(state: dict[str, Any], matrix: Matrix) -> list[str]:
    """What in a GPU's state can move a measurement, with the fix, in plain words."""
    notes = []
    if state.get("persistence_mode") is False:
        notes.append("persistence mode is off: the driver may tear the GPU down between cells "
                     "(slow, variable starts); `sudo nvidia-smi -pm 1`")
    power = state.get("power") or {}
    if power.get("limit_below_default"):
        notes.append(f"power limit {fmt(power['limit_w'])} W is below its default "
                     f"{fmt(power['default_limit_w'])} W: clocks are capped sooner")
    if state.get("other_processes"):
        notes.append(f"{len(state['other_processes'])} other compute process(es) on the GPU: "
                     + ", ".join(f"pid {p['pid']} {p.get('name') or ''}".strip()
                                 for p in state["other_processes"][:3]))
    idle = state.get("idle") or {}
    bound = matrix.spec.run.settle_temperature
    if idle.get("temp_c") is not None and idle["temp_c"] > bound:
        notes.append(f"{idle['temp_c']} °C at idle, above [run] settle_temperature = {bound:g}: "
                     "every cell would wait its whole settle time")
    if idle.get("util_percent"):
        notes.append(f"utilisation {idle['util_percent']} % with nothing of ours running")
    return notes


def show_states(states: list[dict[str, Any]], matrix: Matrix, console: Console) -> None:
    if not states:
        console.print("[bold]GPU:[/] none seen through NVML (the A/A measures the CPU)")
    for state in states:
        clocks, power, idle = state["clocks"], state["power"], state["idle"]
        held = {True: "held (a lock or applications clocks)", False: "not held",
                None: "unknown"}[clocks.get("held")]
        ecc = state.get("ecc") or {}
        line = (f"[bold]GPU {user_text(state['gpu'])}[/] {user_text(state.get('name') or '')}: "
                f"persistence {_on(state.get('persistence_mode'))} · "
                f"ECC {_on(ecc.get('current'))} · clocks {held}: "
                f"SM {_whole(clocks.get('sm_now_mhz'))} MHz now, "
                f"applications {_whole(clocks.get('sm_applications_mhz'))} "
                f"(default {_whole(clocks.get('sm_default_applications_mhz'))}), "
                f"max {_whole(clocks.get('sm_max_mhz'))}; "
                f"memory {_whole(clocks.get('mem_now_mhz'))} MHz · "
                f"power limit {fmt(power.get('limit_w'))} W "
                f"(default {fmt(power.get('default_limit_w'))} W) · "
                f"idle {_whole(idle.get('temp_c'))} °C, {fmt(power.get('draw_w'))} W, "
                f"{_whole(idle.get('util_percent'))} % busy · "
                f"{len(state.get('other_processes') or [])} other compute process(es)")
        console.print(line, highlight=False, soft_wrap=True)
        for note in state_notes(state, matrix):
            console.print(f"  [yellow]![/] {user_text(note)}", highlight=False, soft_wrap=True)


def _whole(value: Any) -> str:
    """An NVML reading in whole units (MHz, °C, %), or – where NVML has none."""
    return "–" if value is None else f"{value:.0f}"


def _on(value: bool | None) -> str:
    return {True: "on", False: "off", None: "unknown"}[value]


# --- the measuring runs --------------------------------------------------------------------------

def measuring_run(matrix: Matrix, cells: list[Cell], name: str, setup: Setup,
              opts: pipeline.Options, folder: Path, log: Console) -> Path:
    """The cells as one run of their own (the real pipeline: plan, environments, executors,
    workers, records, reports) under `folder`/<name>/; its output goes to the log."""
    spec = matrix.spec.model_copy(update={"run": matrix.spec.run.model_copy(update={"name": name})})
    sub = dataclasses.replace(matrix, spec=spec, cells=cells, calibration=[])
    inner = choose_setup(sub, opts.executor)
    inner.clocks = setup.clocks
    state = pipeline.RunState(dataclasses.replace(opts, only=[], results_dir=folder), log,
                              pipeline.Decisions(sub, inner))
    try:
        pipeline.execute(pipeline.CELLS, state)
    finally:
        inner.close()
    return state.store.root


def overhead_cells(matrix: Matrix, gpu: bool) -> list[Cell]:
    """One matmul cell per environment where a matmul exists, pairing the worker's clock with
    a bare loop after its timed window (runner.worker.overhead)."""
    run_settings = matrix.spec.run
    out = []
    for name, env in matrix.spec.environments.items():
        axes = Axes.defaults()
        if catalog.not_applicable_reason("matmul", env.api, env.backend, dict(axes), "run"):
            continue
        n = OVERHEAD_N["gpu" if gpu and catalog.api(env.api, env.backend).gpu else "cpu"]
        out.append(Cell(environment=name, api=env.api, backend=env.backend, image=env.image,
                        python=env.python, workload="matmul", task="run", batch_size=1,
                        axes=axes, options={"n": n}, env=worker_env(run_settings, env),
                        steps="auto", warmup_steps=run_settings.warmup_steps, repeats=1,
                        timeout=run_settings.timeout,
                        settings=protocol.settings_from(run_settings, harness_overhead=True),
                        keep_compile_caches=run_settings.keep_compile_caches,
                        settle_s=run_settings.settle, settle_temp_c=run_settings.settle_temperature))
    return out


def measure_overhead(matrix: Matrix, setup: Setup, opts: pipeline.Options, folder: Path,
                     log: Console, console: Console) -> list[dict[str, Any]]:
    cells = overhead_cells(matrix, gpu=any(lane.gpu for lane in setup.lanes()[0]))
    if not cells:
        console.print("[bold]overhead:[/] no environment of the matrix has a matmul")
        return []
    console.print(f"[bold]overhead:[/] a matmul cell in each of {len(cells)} environment(s), "
                  "the worker's clock against a bare loop in the same process …", soft_wrap=True)
    run_dir = measuring_run(matrix, cells, "overhead", setup, opts, folder, log)
    out = []
    for record in Store(run_dir).records():
        paired = (record.get("extra") or {}).get("harness_overhead") or {}
        entry: dict[str, Any] = {"environment": record["environment"], "api": record["api"],
                 "backend": record.get("backend"), "n": (record.get("options") or {}).get("n"),
                 "status": record["status"], "median_ms": record.get("median_ms"),
                 "ratio": paired.get("ratio"), "quartiles": paired.get("quartiles"),
                 "calls_per_sample": paired.get("calls_per_sample"),
                 "error": record.get("error") or paired.get("error")}
        out.append(entry)
        if entry["ratio"] is not None:
            low, high = entry["quartiles"]
            console.print(f"  {user_text(entry['environment'])}: clock ÷ bare loop "
                          f"{entry['ratio']:.3f} (quartiles {low:.3f}–{high:.3f}; matmul "
                          f"n={entry['n']}, {fmt(entry['median_ms'])} ms, blocks of "
                          f"{entry['calls_per_sample']})", highlight=False, soft_wrap=True)
        else:
            why = (entry["error"] or entry["status"]).strip().splitlines()[-1][:150]
            console.print(f"  [red]✗[/] {user_text(entry['environment'])}: {user_text(why)}",
                          soft_wrap=True)
    return out


def aa_cells(matrix: Matrix, only: list[str]) -> list[Cell]:
    """The A/A's cells: those --only selects, else the first cell of each workload class in the
    matrix's order (not-applicable ones never)."""
    runnable = make_plan(matrix.cells, only).cells
    if only:
        if not runnable:
            raise UsageError(f"--only {' '.join(only)}: no runnable cell of {matrix.path} "
                             "matches")
        return runnable
    if not runnable:
        raise UsageError(f"{matrix.path}: no runnable cell for an A/A run (every cell is not "
                         "applicable)")
    first: dict[str, Cell] = {}
    for cell in runnable:
        first.setdefault(cell.workload, cell)
    return list(first.values())


def measure_aa(matrix: Matrix, cells: list[Cell], setup: Setup, opts: pipeline.Options,
               runs: int, folder: Path, log: Console, console: Console) -> dict[str, Any]:
    console.print(f"[bold]A/A:[/] {len(cells)} cell(s) × {cells[0].repeats} repeat(s), run "
                  f"{runs} times as separate runs: " + ", ".join(user_text(c.name) for c in cells),
                  soft_wrap=True)
    run_dirs = []
    for k in range(1, runs + 1):
        started = time.monotonic()
        run_dirs.append(measuring_run(matrix, cells, "aa", setup, opts, folder, log))
        heads = headlines(run_dirs[-1])
        shown = ", ".join(f"{user_text(name)} {fmt(s['median_ms'])} ms" if s["status"] == "ok"
                          else f"{user_text(name)} [red]{s['status']}[/]"
                          for name, s in heads.items())
        console.print(f"  run {k}/{runs} ({time.monotonic() - started:.0f} s): {shown}",
                      soft_wrap=True, highlight=False)
    return aa_spread([headlines(d) for d in run_dirs], [str(d) for d in run_dirs])


def headlines(run_dir: Path) -> dict[str, CellSummary]:
    """cell name → its summary (the headline: the median of the repeat medians)."""
    return {s["cell_name"]: s for s in cell_summaries(Store(run_dir).records())}


def aa_spread(runs: Sequence[Mapping[str, Mapping[str, Any]]], run_dirs: list[str]) -> dict[str, Any]:
    """Per cell ok in every run: the spread of its headline across the runs (max ÷ min − 1);
    per workload class the largest, and the compare threshold it supports
    (machine_profile.supported_threshold); the machine's: the largest class's."""
    cells, failed = [], []
    for name in runs[0]:
        summaries = [s for r in runs if (s := r.get(name)) is not None
                     and s["status"] == "ok" and s.get("median_ms")]
        if len(summaries) < len(runs):      # failed (or missing) in one of the A/A runs
            failed.append(name)
            continue
        medians = [s["median_ms"] for s in summaries]
        within = [cv for s in summaries if (cv := s.get("cv_repeats")) is not None]
        steps = [cv for s in summaries if (cv := s.get("cv")) is not None]
        cells.append({"cell_name": name, "workload": summaries[0]["workload"],
                      "medians_ms": medians, "spread": max(medians) / min(medians) - 1,
                      "cv_repeats": max(within) if within else None,    # the worst run's
                      "cv": max(steps) if steps else None,     # step-to-step, the worst run's
                      # what the machine did meanwhile (conditions.py), per A/A run
                      "conditions": sorted({kind for s in summaries
                                            for kind in s.get("warning_groups") or {}
                                            if kind != "statistics"})})
    classes: dict[str, dict[str, Any]] = {}
    for cell in cells:
        entry = classes.setdefault(cell["workload"], {"spread": 0.0, "cells": 0, "cv": None})
        entry["spread"] = max(entry["spread"], cell["spread"])
        entry["cells"] += 1
        if cell["cv"] is not None:          # what a cell's CV warning is judged against
            entry["cv"] = max(entry["cv"] or 0.0, cell["cv"])
    for entry in classes.values():
        entry["threshold"] = machine_profile.supported_threshold(entry["spread"])
    spread = max((c["spread"] for c in classes.values()), default=None)
    cvs = [c["cv"] for c in classes.values() if c["cv"] is not None]
    return {"runs": len(runs), "run_dirs": run_dirs, "cells": cells, "failed": failed,
            "classes": classes, "spread": spread, "cv": max(cvs) if cvs else None,
            "threshold": machine_profile.supported_threshold(spread) if spread is not None
            else None}


def show_aa(aa: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Run-to-run spread ({aa['runs']} A/A runs)", title_justify="left")
    for column in ("workload class", "cells", "spread across runs",
                   "CV of repeat medians (worst run)", "step CV (worst)", "threshold"):
        table.add_column(column, justify="left" if column == "workload class" else "right")
    for name, entry in aa["classes"].items():
        within = [c["cv_repeats"] for c in aa["cells"]
                  if c["workload"] == name and c["cv_repeats"] is not None]
        table.add_row(name, str(entry["cells"]), f"{entry['spread'] * 100:.2f} %",
                      f"{max(within) * 100:.2f} %" if within else "–",
                      f"{entry['cv'] * 100:.2f} %" if entry.get("cv") is not None else "–",
                      f"{entry['threshold'] * 100:.1f} %")
    console.print(table)
    for name in aa["failed"]:
        console.print(f"[red]✗[/] {user_text(name)}: not ok in every A/A run (left out)")
    if aa["threshold"] is None:
        console.print("[red]no cell finished ok in every A/A run: no threshold[/]")
        return
    disturbed = sorted({kind for c in aa["cells"] for kind in c["conditions"]})
    if disturbed:
        console.print(f"[yellow]! the A/A runs themselves saw: {', '.join(disturbed)} (their "
                      "reports say where): the spread above is this machine's under that load; "
                      "measure again when it is quiet for its own noise[/]", soft_wrap=True)
    console.print(f"[bold]compare threshold this machine supports: {aa['threshold'] * 100:.1f} %"
                  f"[/] (largest change between two runs of the same cells: "
                  f"{aa['spread'] * 100:.2f} %, rounded up to 0.5 %, at least "
                  f"{machine_profile.MIN_THRESHOLD * 100:.0f} %)", highlight=False,
                  soft_wrap=True)
