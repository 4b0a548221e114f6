"""The run pipeline, a sequence of small steps: load → plan → prepare → run cells → report.

Every failure of a cell becomes a record with a status; only invalid input stops the run
before anything is written (exit code 2)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.table import Table

from . import gpustate, hostinfo, machine_profile, matrix as matrix_mod, resume, scheduling
from .results import records as record_mod, stats
from .results.formatting import fmt
from .results.terminal import tables
from .results.write import write_reports
from .errors import (EXIT_FAILED_CELLS, EXIT_OK, UsageError, interrupted_exit_code, one_line,
                     os_error_line)
from .environments import Flavour, Source
from .executors import auto, kinds
from .executors.base import (Attempt, Executor, ExecutorUnavailable, GpuRequest, Outcome, Prepared,
                             write_spec)
from .matrix import Cell, Matrix
from .plan import Entry, Plan, make_plan
from .results.store import RESULTS_DIR, Store
from .scheduling import Lane
from .version import runner_version
from .worker.protocol import COMPILE_CACHE_ENV, CellSpec, write_json_atomic


@dataclass
class Options:
    matrix_path: Path
    only: list[str] = field(default_factory=list)
    profile: str | None = None
    executor: str | None = None
    resume: Path | bool | None = None     # True: the latest run of this matrix's name
    dry_run: bool = False
    results_dir: Path = RESULTS_DIR
    parallel: int | str | None = None     # --parallel: overrides [run] parallel
    ray_address: str | None = None        # --ray-address (else RAY_ADDRESS, else a local Ray)
    push: str | None = None               # build --push REGISTRY
    history: bool = True                  # write the finished run to the history database
    run_dir: Path | None = None           # set by run_matrix: the run folder it wrote


def load_matrix(opts: Options, console: Console) -> tuple[Matrix, "Setup"]:
    """The matrix and the run's setup. With the Ray executor, profile = "auto" looks at the
    cluster's GPUs, not at the machine the runner was started on."""
    gpu = hostinfo.gpu_found()
    matrix = matrix_mod.load(opts.matrix_path, opts.profile, gpu_found=gpu)
    setup = choose_setup(matrix, opts.executor, opts.parallel, opts.ray_address)
    cluster = setup.executor.cluster()
    if cluster is not None and matrix.profile_reason.startswith("auto"):
        cluster_gpus = cluster["gpus"]
        matrix = matrix_mod.load(opts.matrix_path, opts.profile, gpu_found=bool(cluster_gpus))
        matrix.profile_reason = f"auto: the Ray cluster has {cluster_gpus} GPUs" + \
            ("" if cluster_gpus else ", so the smoke profile is in force")
    console.print(f"[bold]profile:[/] {matrix.profile} ({escape(matrix.profile_reason)})", soft_wrap=True)
    return matrix, setup


@dataclass
class Setup:
    """The run's decisions, made once and shown in its first lines: which executor runs the
    image-folder environments and why, which flavour of their locks and why. Existing
    interpreters (python = ...) always run as local processes."""

    executor: Executor
    reason: str
    gpu: bool = False                     # this host has a GPU
    parallel: int | str = "auto"          # [run] parallel or --parallel
    parallel_asked: str = "[run] parallel = 'auto'"
    _lanes: tuple[list[Lane], str] | None = None
    _local: Executor | None = None        # runs existing interpreters the executor does not
    _images: Executor | None = None       # runs images named by digest the executor does not
    clocks: dict[str, Any] | None = None  # [run] lock_clocks: what was locked (gpustate)

    @property
    def flavour(self) -> Flavour:
        return self.executor.flavour

    def executor_for(self, source: Source) -> Executor:
        if source.existing and not self.executor.runs_existing:
            if self._local is None:
                self._local = kinds.create("local", self.flavour, self.gpu)
            return self._local
        if source.by_digest and not self.executor.runs_images:
            # An image named by digest runs only as that image: in Docker, whatever the run's
            # executor for image folders.
            if self._images is None:
                self._images = kinds.create("docker", self.flavour, self.gpu)
            return self._images
        return self.executor

    def lanes(self) -> tuple[list[Lane], str]:
        """Where cells run at once, and why: this host's GPUs, or the Ray cluster's slots."""
        if self._lanes is None:
            slots = self.executor.slots(self.parallel)
            if slots is not None:
                count, found = slots
                lanes = [Lane(f"ray {i + 1}", local=False) for i in range(count)]
                self._lanes = lanes, f"{self.parallel_asked}: {found}"
            else:
                gpus = hostinfo.visible_gpus(hostinfo.gpus())
                self._lanes = scheduling.gpu_lanes(self.parallel, gpus, self.parallel_asked)
        return self._lanes

    def alone(self, cell: Cell) -> bool:
        """A CPU cell on a host whose lanes are GPUs runs alone (Ray keeps it alone on its node
        by the resources it asks for)."""
        lanes, _ = self.lanes()
        return cell.axes["device"] == "cpu" and lanes[0].local and lanes[0].gpu is not None

    def would_use(self, source: Source) -> tuple[str, str | None, str]:
        """(executor name, flavour, what it uses) without building anything."""
        executor = self.executor_for(source)
        flavour, uses = executor.would_use(source)
        return executor.name, flavour, uses

    def executors(self) -> list[Executor]:
        found = [e for e in (self.executor, self._local, self._images) if e is not None]
        return list({id(e): e for e in found}.values())

    def interrupt(self) -> None:
        for executor in self.executors():
            executor.interrupt()

    def close(self) -> None:
        for executor in self.executors():
            executor.close()


def source_of(cell: Cell) -> Source:
    return Source.of(cell.image, cell.python)


def sources_to_prepare(plan: Plan, extra: list[Cell] = ()) -> list[Source]:
    """Each source the planned runs (and calibrations) need, once (environments may share an
    image folder)."""
    cells = [e.cell for e in plan.to_run] + list(extra)
    return list({source_of(c).key: source_of(c) for c in cells}.values())


def calibrations_for(plan: Plan, matrix: Matrix) -> list[Cell]:
    """[run] calibrate: the calibrations of the environments the plan's cells use (--only
    narrows them), never of an environment no selected cell runs in."""
    used = {cell.environment for cell in plan.cells}
    return [cell for cell in matrix.calibration if cell.environment in used]


def show_preparation(matrix: Matrix, plan: Plan, calibrations: list[Cell], console: Console,
                     action: str = "prepares") -> None:
    """One line: what will be built (or found ready) and why, and what the selection leaves
    out — environments sharing an image folder share one build."""
    needs: dict[str, dict[str, Any]] = {}
    for cell, what in [(e.cell, "cells") for e in plan.to_run] + \
            [(c, "calibration") for c in calibrations]:
        need = needs.setdefault(source_of(cell).label,
                                {"envs": {}, "cells": 0, "calibration": 0})
        need["envs"][cell.environment] = True
        need[what] += 1
    parts = []
    for key, need in needs.items():
        why = [f"{need['cells']} runs"] if need["cells"] else []
        why += ["calibration"] if need["calibration"] else []
        parts.append(f"{key} ({', '.join(need['envs'])}: {' + '.join(why)})")
    used = {env for need in needs.values() for env in need["envs"]}
    left = [name for name in matrix.spec.environments if name not in used]
    line = f"{action} {len(parts)} environment(s): " + ("; ".join(parts) or "none")
    if left:
        line += f"; not {', '.join(left)} (no selected cell runs there)"
    console.print(f"[bold]build:[/] {escape(line)}", soft_wrap=True, highlight=False)


def choose_setup(matrix: Matrix | None, requested: str | None,
                 parallel: int | str | None = None, ray_address: str | None = None,
                 flavour: Flavour | None = None) -> Setup:
    """`flavour` forces the locks' flavour (a reproduction uses the recorded one)."""
    from .environments import decide_flavour

    facts = hostinfo.gpu_facts()
    gpu = bool(facts.get("gpu_count"))
    flavour = flavour or decide_flavour(facts.get("gpu_count") or 0, facts.get("gpu_name"))
    kind = requested or (matrix.spec.run.executor if matrix is not None else "auto")
    reason = f"--executor {kind}" if requested else f"[run] executor = {kind!r}"
    if parallel is not None:
        lanes = dict(parallel=parallel, parallel_asked=f"--parallel {parallel}")
    else:
        setting = matrix.spec.run.parallel if matrix is not None else "auto"
        lanes = dict(parallel=setting, parallel_asked=f"[run] parallel = {setting!r}")
    if kind == "auto":
        kind, reason = auto.choose(gpu)
    if kind not in kinds.KINDS:
        raise UsageError(f"executor {kind!r} is not available (use auto, local, docker or ray)")
    if not kinds.executor_class(kind).on_this_host:
        refuse_digest_images(matrix, kind)
    try:
        executor = kinds.create(kind, flavour, gpu, ray_address)
        executor.cluster()          # a cluster joined now: one that does not answer stops here
    except ExecutorUnavailable as exc:
        raise UsageError(str(exc)) from None
    where = f"; {executor.where}" if executor.where else ""
    return Setup(executor, reason + where, gpu, **lanes)


def refuse_digest_images(matrix: Matrix | None, kind: str) -> None:
    """An image named by digest runs on this host (in Docker): not with an executor that
    places cells on other machines."""
    pinned = [n for n, e in (matrix.spec.environments.items() if matrix else ())
              if e.image is not None and Source.of(e.image).by_digest]
    if pinned:
        raise UsageError(f"{matrix.path}: environments.{pinned[0]}.image: an image named by "
                         f"digest runs with the local or docker executor, not {kind}")


def environment_table(matrix: Matrix, setup: Setup, cells: list[Cell]) -> Table:
    """Per environment: the executor, the flavour and the lock, image or interpreter it uses."""
    table = Table(title="Environments", title_justify="left")
    for column in ("environment", "api", "executor", "flavour"):
        table.add_column(column, no_wrap=True)
    table.add_column("uses", overflow="fold")
    for name in dict.fromkeys(c.environment for c in cells):
        env = matrix.spec.environments[name]
        executor, flavour, uses = setup.would_use(Source.of(env.image, env.python))
        api = env.api + (f"/{env.backend}" if env.backend else "")
        table.add_row(escape(name), escape(api), executor, flavour or "as installed",
                      escape(uses))
    return table


def show_env(matrix: Matrix, cells: list[Cell], console: Console) -> None:
    """The variables each environment's workers get from the matrix ([run] preallocate and its
    own env), one line per environment that sets any; unsafe_env is said."""
    first = {c.environment: c for c in reversed(cells)}
    lines = []
    for name in dict.fromkeys(c.environment for c in cells):
        variables = " ".join(f"{k}={v}" for k, v in first[name].env.items())
        unsafe = matrix.spec.environments[name].unsafe_env
        if variables:
            lines.append(f"[bold]env {escape(name)}:[/] {escape(variables)}"
                         + (" [red](unsafe_env = true)[/]" if unsafe else ""))
    for line in lines or ["[bold]env:[/] no environment sets variables"]:
        console.print(line, soft_wrap=True, highlight=False)


def show_setup(matrix: Matrix, setup: Setup, cells: list[Cell], console: Console) -> None:
    # soft_wrap: one line each, whatever the terminal's width (logs and tests read them).
    console.print(f"[bold]executor:[/] {setup.executor.name} ({escape(setup.reason)})",
                  soft_wrap=True)
    console.print(f"[bold]flavour:[/] {setup.flavour.name} ({escape(setup.flavour.reason)})",
                  soft_wrap=True)
    lanes, why = setup.lanes()
    console.print(f"[bold]parallel:[/] {scheduling.lanes_text(lanes)} ({escape(why)})",
                  soft_wrap=True)
    if cells:
        console.print(environment_table(matrix, setup, cells))
        show_env(matrix, cells, console)


def open_store(matrix: Matrix, opts: Options, console: Console) -> Store:
    """A new run folder, or (--resume) the run's own: locked, made by this runner version, its
    matrix the same as now, its unusable records set aside so that their cells run again."""
    if not opts.resume:
        return Store.create(matrix.spec.run.name, opts.results_dir)
    root = opts.resume if isinstance(opts.resume, Path) else \
        Store.latest(matrix.spec.run.name, opts.results_dir)
    store = Store.open(root)
    try:
        check_resumable(store)
        for change in resume.check_same_matrix(store, store.read_manifest(), matrix.resolved,
                                               matrix.path):
            console.print(f"resuming with {escape(change)}", soft_wrap=True)
        resume.set_aside(store, lambda line: console.print(f"[yellow]! {escape(line)}[/]",
                                                            soft_wrap=True))
    except BaseException:
        store.close()
        raise
    return store


def check_resumable(store: Store) -> None:
    """A run is resumed only by the runner version that made it: another version's cells have
    other ids and its numbers would not compare (one line, exit 2, nothing written)."""
    try:
        made_by = store.read_manifest().get("runner_version")
    except (OSError, ValueError, AttributeError):
        made_by = None
    if made_by != runner_version():
        raise UsageError(f"--resume {store.root}: made by runner version "
                         f"{made_by or '(unversioned, older)'}, this is {runner_version()}: its "
                         "numbers would not compare with this runner's; start a new run")


def plan_table(matrix: Matrix, plan: Plan) -> Table:
    table = Table(title=escape(f"Plan: {matrix.path} (profile {matrix.profile})"),
                  title_justify="left")
    table.add_column("cell", overflow="fold")
    table.add_column("id", no_wrap=True)
    table.add_column("repeats", justify="right")
    table.add_column("steps", justify="right")
    table.add_column("state", overflow="fold")
    pending = {e.cell.id for e in plan.to_run}
    done_counts = Counter(e.cell.id for e in plan.done)
    for cell in plan.cells:
        done = done_counts[cell.id]
        state = "to run" if cell.id in pending else "done"
        if done and cell.id in pending:
            state = f"{done} done, rest to run"
        table.add_row(escape(cell.name), cell.id, str(cell.repeats),
                      f"{cell.warmup_steps}+{cell.steps}", state)
    for cell in plan.not_applicable:
        table.add_row(escape(cell.name), cell.id, "–", "–",
                      f"[yellow]NA: {escape(cell.not_applicable)}[/]")
    table.caption = (f"{len(plan.to_run)} runs to do, {len(plan.done)} done, "
                     f"{len(plan.not_applicable)} not applicable, {plan.filtered_out} filtered out")
    return table


def cell_spec(cell: Cell, repeat: int, run_id: str, seed: int, result_path: str,
              calls_per_sample: int | None = None) -> CellSpec:
    return CellSpec(
        run_id=run_id, cell_id=cell.id, cell_name=cell.name, repeat=repeat,
        environment=cell.environment, api=cell.api, backend=cell.backend, image=cell.image,
        workload=cell.workload, task=cell.task, batch_size=cell.batch_size, options=cell.options,
        steps=cell.steps, warmup_steps=cell.warmup_steps, seed=seed, result_path=result_path,
        min_time_s=cell.min_time_s, max_time_s=cell.max_time_s,
        calibration_sizes=list(cell.calibration_sizes), calls_per_sample=calls_per_sample,
        harness_overhead=cell.harness_overhead, **cell.axes)


class BlockSizes:
    """One block size per cell, as pyperf hands its calibrated loop count to every worker: the
    cell's first repeat to finish ok calibrates calls_per_sample, and every later repeat is
    handed it in its spec, so every repeat of a cell measures the same thing and takes as many
    samples. Known sizes come from the stored records too (--resume).

    In a parallel run a later repeat of a cell waits until the repeat calibrating the cell (its
    lowest repeat still to run) has finished; other cells' entries start meanwhile. If that
    repeat does not finish ok, the cell's next repeat calibrates instead. A serial run needs no
    waiting: the plan runs round 1 of every cell before round 2."""

    def __init__(self, stored: list[dict[str, Any]], to_run: list[Entry]):
        self.sizes: dict[str, int] = {}
        for record in sorted(stored, key=lambda r: r.get("repeat") or 0):
            self._learn(record)
        self.waiting: dict[str, list[str]] = {}     # cell id → keys still to run, repeat order
        for entry in sorted(to_run, key=lambda e: e.repeat):
            self.waiting.setdefault(entry.cell.id, []).append(entry.key)

    def _learn(self, record: dict[str, Any]) -> None:
        size = record.get("calls_per_sample")
        if record.get("status") == "ok" and isinstance(size, int) and size >= 1:
            self.sizes.setdefault(record["cell_id"], size)

    def size(self, cell: Cell) -> int | None:
        """The block size to hand this cell's next repeat; None: it calibrates its own."""
        return self.sizes.get(cell.id)

    def ready(self, entry: Entry) -> bool:
        """Whether the entry may start: its cell's size is known, or it calibrates it."""
        waiting = self.waiting.get(entry.cell.id) or [entry.key]
        return entry.cell.id in self.sizes or waiting[0] == entry.key

    def finished(self, entry: Entry, record: dict[str, Any]) -> None:
        keys = self.waiting.get(entry.cell.id, [])
        if entry.key in keys:
            keys.remove(entry.key)
        self._learn(record)


def manifest_for(matrix: Matrix, plan: Plan, store: Store, setup: Setup,
                 prepared: dict[str, Prepared]) -> dict[str, Any]:
    environments = {}
    for name, env in matrix.spec.environments.items():
        source = Source.of(env.image, env.python)
        executor, flavour, uses = setup.would_use(source)
        entry = {**env.model_dump(), "executor": executor, "flavour": flavour, "uses": uses}
        if source.key in prepared:
            entry.update(prepared[source.key].metadata)
            if prepared[source.key].warnings:
                entry["warnings"] = prepared[source.key].warnings
        environments[name] = entry
    planned = {c.id for c in plan.cells} | {c.id for c in plan.not_applicable}
    return {
        "schema": 1,
        "name": matrix.spec.run.name,
        "run_id": store.run_id,
        "runner_version": runner_version(),
        "matrix": str(matrix.path),
        # A resume refuses another matrix: the digest of this one, profile applied.
        "matrix_sha256": resume.matrix_sha256(matrix.resolved),
        "profile": matrix.profile,
        "profile_reason": matrix.profile_reason,
        "executor": setup.executor.name,
        "executor_reason": setup.reason,
        "flavour": setup.flavour.name,
        "flavour_reason": setup.flavour.reason,
        "parallel": parallel_manifest(setup),
        "gpu_clocks": setup.clocks,
        # results/<name>/<stamp>: the results folder holds machine-profiles/ too
        "machine_profile": machine_profile.manifest_entry(store.root.parent.parent,
                                                          setup.executor),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": hostinfo.host_summary(),
        "environments": environments,
        # Matrix order, so reports list rows and environment columns as the matrix does.
        "cells": [{"id": c.id, "name": c.name, "environment": c.environment,
                   "repeats": c.repeats, "not_applicable": c.not_applicable}
                  for c in matrix.cells if c.id in planned],
    }


def parallel_manifest(setup: Setup) -> dict[str, Any]:
    lanes, why = setup.lanes()
    out: dict[str, Any] = {"lanes": [lane.label for lane in lanes], "reason": why}
    gpus = [lane.gpu for lane in lanes if lane.gpu is not None]
    if gpus:
        out["gpus"] = [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in gpus]
    out.update(setup.executor.placement_manifest())
    return out


def announce_machine(manifest: dict[str, Any], console: Console) -> None:
    """The run's first lines say whether this machine's noise is known (a machine profile)."""
    profile = manifest["machine_profile"]
    if profile.get("found"):
        console.print(f"[bold]machine profile:[/] {escape(profile['path'])} (compare threshold "
                      f"{profile.get('threshold', 0) * 100:.1f} %, measured "
                      f"{profile.get('measured_at')})", soft_wrap=True)
    elif profile.get("key"):
        console.print(f"[yellow]! {escape(profile['why'])}: its noise is unknown; measure it "
                      f"with `python -m runner doctor --measure MATRIX`[/]", soft_wrap=True)


def record_not_applicable(store: Store, plan: Plan, run_id: str, seed: int) -> None:
    for cell in plan.not_applicable:
        key = f"{cell.id}-r1"
        if not store.record_path(key).exists():
            spec = cell_spec(cell, 1, run_id, seed, "")
            store.write_record(key, record_mod.not_applicable_record(spec, cell.not_applicable))


def prepare_environments(setup: Setup, sources: list[Source],
                         console: Console) -> dict[str, Prepared]:
    prepared: dict[str, Prepared] = {}
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        for source in sources:
            label = escape(source.key)
            task = progress.add_task(f"environment {label}: preparing")
            started = time.monotonic()

            def show(line: str, task=task, label=label) -> None:
                progress.update(task, description=f"environment {label}: {escape(line[:90])}")

            ready = setup.executor_for(source).prepare(source, show)
            prepared[source.key] = ready
            progress.remove_task(task)
            took = time.monotonic() - started
            if ready.error:
                console.print(f"[red]✗ environment {label}: {escape(ready.error)}[/]")
            else:
                console.print(f"[green]✓[/] environment {label} ready ({took:.0f} s)")
            for warning in ready.warnings:
                console.print(f"[yellow]! environment {label}: {escape(warning)}[/]")
    return prepared


def host_metadata(entry: Entry, prepared: Prepared, placement: dict[str, Any]) -> dict[str, Any]:
    """What the host adds to a record's metadata: the environment's facts (lock, image), where
    the cell ran, the runner's version and the variables the matrix set for the worker."""
    return {**prepared.metadata, **placement, **gpustate.lock_metadata(placement),
            "runner_version": runner_version(), "worker_env": dict(entry.cell.env)}


def adopt_orphan(entry: Entry, store: Store, seed: int,
                 host_metadata: dict[str, Any]) -> dict[str, Any] | None:
    """On resume: a worker that finished while the runner died before storing its record left
    a complete result.json; store it instead of measuring again (nothing finished is lost)."""
    path = store.orphaned_result(entry.key)
    worker = record_mod.read_worker_result(path) if path else None
    if worker is None or worker.get("cell_id") != entry.cell.id:
        return None
    spec = cell_spec(entry.cell, entry.repeat, store.run_id, seed, str(path))
    outcome = Outcome(returncode=0, timed_out=False, wall_s=None)
    record = record_mod.finalize(spec, outcome, worker, host_metadata, f"logs/{entry.key}.log")
    record["extra"] = {**(record["extra"] or {}), "adopted_after_interrupt": True}
    store.write_record(entry.key, record)
    return record


def run_entry(executor: Executor, entry: Entry, prepared: Prepared, store: Store,
              seed: int, lane: Lane = scheduling.CPU_LANE, stop: threading.Event | None = None,
              on_status: Callable[[str], None] = lambda text: None,
              calls_per_sample: int | None = None) -> dict[str, Any]:
    """Run one cell × repeat on its lane and store its record. When `stop` is set meanwhile
    (Ctrl-C in a parallel run) nothing is stored, as when a serial run is interrupted.
    calls_per_sample: the cell's block size handed over from its first repeat (BlockSizes)."""
    check_free_disk(store)
    placement = lane.placement()
    adopted = adopt_orphan(entry, store, seed, host_metadata(entry, prepared, {}))
    if adopted is not None:
        return adopted
    key = entry.key
    work = store.work_dir(key)
    spec = cell_spec(entry.cell, entry.repeat, store.run_id, seed, str(work / "result.json"),
                     calls_per_sample)
    log_rel = f"logs/{key}.log"
    if prepared.error:
        outcome = Outcome(returncode=None, timed_out=False, wall_s=0.0)
        worker = {"schema": 1, "status": "failed", "error": prepared.error}
    else:
        settled = settle_before(entry.cell, lane, on_status, stop)
        store.log_path(key).unlink(missing_ok=True)
        attempt = Attempt(spec=spec, work_dir=work, log_path=store.log_path(key),
                          env={**entry.cell.env, **({"KERAS_BACKEND": entry.cell.backend}
                                                    if entry.cell.backend else {}),
                               **({COMPILE_CACHE_ENV: "kept"}
                                  if entry.cell.keep_compile_caches else {})},
                          timeout=entry.cell.timeout,
                          gpu=gpu_request(entry.cell, lane),
                          placement=placement, on_status=on_status)
        write_spec(attempt)
        outcome = executor.run(prepared, attempt)
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt     # killed by the interrupt: no record, --resume reruns it
        worker = record_mod.read_worker_result(attempt.result_path)
    record = record_mod.finalize(spec, outcome, worker, host_metadata(entry, prepared, placement),
                                 log_rel)
    record["settle"] = None if prepared.error else settled
    store.write_record(key, record)
    return record


def gpu_request(cell: Cell, lane: Lane) -> GpuRequest | None:
    """What the cell asks of the GPU on its lane: none for a CPU cell, else the lane's GPU (or
    the executor's default where the lane has none)."""
    if cell.axes["device"] == "cpu":
        return None
    return GpuRequest(lane.gpu.device_id if lane.gpu is not None else None)


MIN_FREE_ENV = "DL_BENCH_MIN_FREE_MB"
MIN_FREE_MB = 200


def min_free_mb() -> int:
    text = os.environ.get(MIN_FREE_ENV, str(MIN_FREE_MB))
    if not text.strip().isdigit():
        raise UsageError(f"{MIN_FREE_ENV}={text!r}: expected a whole number of MB")
    return int(text)


def check_free_disk(store: Store) -> None:
    """Before each cell: stop (one line, finished cells kept) when the run folder's disk is
    nearly full, rather than losing a measurement to a failed write."""
    free_mb = shutil.disk_usage(store.root).free / 2**20
    if free_mb < min_free_mb():
        raise UsageError(f"{store.root}: only {free_mb:.0f} MB free on its disk, below "
                         f"{min_free_mb()} MB ({MIN_FREE_ENV})")


def settle_before(cell: Cell, lane: Lane, on_status: Callable[[str], None],
                  stop: threading.Event | None = None) -> dict[str, Any] | None:
    """[run] settle: wait for a quiet GPU before a GPU cell on this host's lane (a Ray slot's
    GPU is on its node; a CPU cell needs none); the record's `settle`."""
    if cell.axes["device"] == "cpu" or not lane.local or lane.gpu is None:
        return None
    return gpustate.settle_gpu(lane.gpu.device_id, cell.settle_s, cell.settle_temp_c, on_status,
                               stop)


@contextlib.contextmanager
def clocks_locked(matrix: Matrix, setup: Setup, console: Console) -> Iterator[None]:
    """[run] lock_clocks for the block: the run's GPUs locked (setup.clocks says how), reset
    however the block ends; a refusal is one line, exit 2, before anything is written."""
    setting = matrix.spec.run.lock_clocks
    if setting is not False and not setup.executor.on_this_host:
        raise UsageError(f"{matrix.path}: run.lock_clocks: locks this host's GPUs; with the "
                         f"{setup.executor.name} executor lock them on each node (sudo nvidia-smi "
                         "-lgc) instead")
    device_ids = [lane.gpu.device_id for lane in setup.lanes()[0] if lane.gpu is not None] \
        if setting is not False else []
    def notify(text: str) -> None:
        console.print(f"[bold]clocks:[/] {escape(text)}", soft_wrap=True)

    with gpustate.locked_clocks(setting, device_ids, notify) as setup.clocks:
        yield


CALIBRATION_METHOD = ("dense matmul (A·B, n×n) at each size of calibration_sizes in every "
                      "environment, steps = auto with block samples; the fastest median TFLOP/s "
                      "per device and precision is the peak (a measurement of this run, before its "
                      "cells; never a cell of the run, never a datasheet figure)")


def run_calibration(setup: Setup, calibrations: list[Cell], prepared: dict[str, Prepared],
                    store: Store, seed: int, console: Console) -> dict[str, Any] | None:
    """[run] calibrate: measure each device's peak per precision before the cells (kept in
    calibration/ and in the manifest; on --resume the stored ones are reused)."""
    if not calibrations:
        return None
    sub = store.calibration()
    done = sub.finished()
    records = []
    for cell in calibrations:
        entry = Entry(cell, 1)
        source = source_of(cell)
        if entry.key in done or source.key not in prepared:
            continue
        executor = setup.executor_for(source)
        record = run_entry(executor, entry, prepared[source.key], sub, seed,
                           lane=setup.lanes()[0][0])
        mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
        console.print(f"{mark} calibration {escape(cell.environment)} "
                      f"{cell.axes['precision']}: {escape(peak_text(record))}")
        stop_if_lost(executor)
    records = sub.records()
    return {"method": CALIBRATION_METHOD, "peaks": stats.peaks_from(records)}


def peak_text(record: dict[str, Any]) -> str:
    if record["status"] != "ok":
        return outcome_text(record)
    return f"{record['achieved_tflops']:.4g} TFLOP/s at n={record['options'].get('n')}"


def ran_on(record: dict[str, Any]) -> str:
    """[GPU 1] or [127.0.0.3 GPU 0]: where a record's cell ran, for the progress lines of a
    parallel or Ray run."""
    meta = record.get("metadata") or {}
    parts = [meta["node_ip"]] if "node_ip" in meta else []
    if "gpu_index" in meta:
        parts.append(f"GPU {meta['gpu_index']}")
    return f" [{' '.join(parts)}]" if parts else ""


def outcome_text(record: dict[str, Any]) -> str:
    if record["status"] == "ok" and record.get("median_ms") is not None:
        return f"{fmt(record['median_ms'])} ms/step"
    error = (record.get("error") or "").strip().splitlines()
    return f"{record['status']}: {error[-1][:120] if error else ''}"


def execute(opts: Options, console: Console) -> int:
    matrix, setup = load_matrix(opts, console)
    try:
        if opts.dry_run:
            return run_matrix(opts, matrix, setup, console)
        with clocks_locked(matrix, setup, console):
            return run_matrix(opts, matrix, setup, console)
    finally:
        setup.close()       # also when the input turns out bad (exit 2) after Ray connected


def run_matrix(opts: Options, matrix: Matrix, setup: Setup, console: Console) -> int:
    store: Store | None = None
    if opts.resume and not opts.dry_run:
        store = open_store(matrix, opts, console)
    try:
        plan = make_plan(matrix.cells, opts.only, store.finished() if store else set())
        if opts.only and not plan.to_run and not plan.done and not plan.not_applicable:
            raise UsageError(f"--only {' '.join(opts.only)}: no cell of {matrix.path} matches")
        show_setup(matrix, setup, plan.cells, console)
        calibrations = calibrations_for(plan, matrix)
        show_preparation(matrix, plan, calibrations, console)
        if opts.dry_run:
            console.print(plan_table(matrix, plan))
            return EXIT_OK
        store = store or open_store(matrix, opts, console)
        return run_in_store(opts, matrix, setup, plan, calibrations, store, console)
    finally:
        if store is not None:
            store.close()


def run_in_store(opts: Options, matrix: Matrix, setup: Setup, plan: Plan,
                 calibrations: list[Cell], store: Store, console: Console) -> int:
    opts.run_dir = store.root
    sources = sources_to_prepare(plan, calibrations)
    console.print(f"run folder: {escape(str(store.root))}", soft_wrap=True)
    announce_machine(manifest_for(matrix, plan, store, setup, {}), console)
    seed = matrix.spec.run.seed
    if not opts.resume:
        store.write_matrix(matrix.resolved)   # a resume never rewrites what the run ran
    manifest = manifest_for(matrix, plan, store, setup, {})
    store.write_manifest(manifest)
    record_not_applicable(store, plan, store.run_id, seed)
    interrupted: KeyboardInterrupt | None = None
    stopped: RunStopped | None = None     # an executor lost: exit 1
    halted: str | None = None             # the disk or the folder said no: exit 2, one line
    try:
        prepared = prepare_environments(setup, sources, console)
        manifest = manifest_for(matrix, plan, store, setup, prepared)
        manifest["calibration"] = run_calibration(setup, calibrations, prepared, store, seed,
                                                  console)
        store.write_manifest(manifest)
        run_cells(setup, plan, prepared, store, seed, console)
    except KeyboardInterrupt as exc:    # Ctrl-C, SIGTERM or SIGHUP (errors.Terminated)
        interrupted = exc
        console.print(f"[yellow]interrupted: finished cells are kept; continue with: python -m "
                      f"runner {escape(str(matrix.path))} --resume {escape(str(store.root))}[/]",
                      soft_wrap=True)
    except RunStopped as exc:
        stopped = exc
        if exc.record is not None:
            console.print(f"[red]✗[/] {escape(exc.cell)}: {escape(outcome_text(exc.record))}")
    except (OSError, UsageError) as exc:     # a full disk: stop, keep what is finished
        halted = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
    finally:
        setup.close()
        summaries = finish(store, manifest, interrupted is not None,
                           stopped.reason if stopped is not None else halted, console)
    if halted:
        raise UsageError(f"run stopped: {halted}; finished cells are kept — continue with: "
                         f"{resume_command(opts, setup, store)}")
    for table in tables(summaries, escape(f"{matrix.spec.run.name} ({store.root})")):
        console.print(table)
    console.print(f"report: {escape(str(store.root / 'report.md'))}", soft_wrap=True)
    if stopped is not None:
        finished = store.finished()
        left = len(plan.to_run) - sum(1 for e in plan.to_run if e.key in finished)
        console.print(f"[red]stopped:[/] {escape(stopped.reason)}; {left} runs not done; "
                      f"continue with: {escape(resume_command(opts, setup, store))}",
                      soft_wrap=True, highlight=False)
        return EXIT_FAILED_CELLS
    if opts.history and interrupted is None:
        from .history.record import record_finished_run

        record_finished_run(store.root, matrix.spec.history.url, opts.results_dir, console)
    if interrupted is not None:
        return interrupted_exit_code(interrupted)
    failed = [s for s in summaries if s["status"] not in ("ok", "not_applicable")]
    return EXIT_FAILED_CELLS if failed else EXIT_OK


def finish(store: Store, manifest: dict[str, Any], interrupted: bool, stopped: str | None,
           console: Console) -> list[dict[str, Any]]:
    """Finalise the manifest, then the reports, in the room the run kept aside (a run stopped
    by a full disk still says how it ended). A report that cannot be written is a warning."""
    store.release_reserve()
    manifest["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest["interrupted"] = interrupted
    if stopped:
        manifest["stopped"] = one_line(stopped)
    try:
        store.write_manifest(manifest)
        return write_reports(store, manifest)
    except OSError as exc:
        console.print(f"[yellow]! reports not written: {escape(os_error_line(exc))}[/]",
                      soft_wrap=True)
        return []


class RunStopped(Exception):
    """An executor can run no more cells (its Docker engine or Ray cluster is gone): the run
    stops after the cell that found out (its record stored), keeping every finished record."""

    def __init__(self, reason: str, cell: str = "", record: dict[str, Any] | None = None):
        super().__init__(reason)
        self.reason, self.cell, self.record = reason, cell, record


def stop_if_lost(executor: Executor, cell: str = "", record: dict[str, Any] | None = None) -> None:
    lost = getattr(executor, "lost", None)
    if lost:
        raise RunStopped(lost, cell, record)


def resume_command(opts: Options, setup: Setup, store: Store) -> str:
    """The command that continues this run where it stopped: the same selection and executor."""
    import os
    import shlex
    import sys

    python = os.path.relpath(sys.executable)
    args = [python if not python.startswith("..") else sys.executable, "-m", "runner",
            str(opts.matrix_path), "--resume", str(store.root), "--executor", setup.executor.name]
    for pattern in opts.only:
        args += ["--only", pattern]
    for flag, value in (("--profile", opts.profile), ("--parallel", opts.parallel),
                        ("--ray-address", opts.ray_address)):
        if value is not None:
            args += [flag, str(value)]
    return shlex.join(args)


def run_cells(setup: Setup, plan: Plan, prepared: dict[str, Prepared], store: Store, seed: int,
              console: Console) -> None:
    """Every planned cell × repeat, on the run's lanes (one per GPU, or one at a time)."""
    lanes = scheduling.Lanes(setup.lanes()[0], console)
    blocks = BlockSizes(store.records(), plan.to_run)

    def run_one(entry: Entry, lane: Lane, show: Callable[[str], None]) -> dict[str, Any]:
        source = source_of(entry.cell)
        executor = setup.executor_for(source)
        record = run_entry(executor, entry, prepared[source.key], store, seed,
                           lane=lane, stop=lanes.stop, on_status=show,
                           calls_per_sample=blocks.size(entry.cell))
        stop_if_lost(executor, f"{entry.cell.name} r{entry.repeat}", record)
        return record

    def done(entry: Entry, record: dict[str, Any], progress: Progress) -> None:
        blocks.finished(entry, record)
        mark = "[green]✓[/]" if record["status"] == "ok" else "[red]✗[/]"
        progress.console.print(f"{mark} {escape(entry.cell.name)} r{entry.repeat}"
                               f"{escape(ran_on(record))}: {escape(outcome_text(record))}")

    lanes.run(plan.to_run, label=lambda e: f"{e.cell.name} r{e.repeat}",
              alone=lambda e: setup.alone(e.cell), run_one=run_one, done=done,
              interrupt=setup.interrupt, ready=blocks.ready)


REGISTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def build_only(opts: Options, console: Console) -> int:
    """`runner build`: prepare every environment the matrix needs, run nothing; with --push,
    push each built image and record the digests that name them."""
    if opts.push is not None:
        if not REGISTRY.match(opts.push):
            raise UsageError(f"--push {opts.push!r}: expected a registry as HOST[:PORT][/PATH] "
                             "(no scheme), e.g. 127.0.0.1:5000")
        if opts.executor not in (None, "docker"):
            raise UsageError(f"--push pushes Docker images: it needs --executor docker, "
                             f"not {opts.executor}")
        opts.executor = "docker"
    matrix, setup = load_matrix(opts, console)
    try:
        plan = make_plan(matrix.cells, opts.only)
        show_setup(matrix, setup, plan.cells, console)
        show_preparation(matrix, plan, [], console, action="builds")
        sources = sources_to_prepare(plan)
        prepared = prepare_environments(setup, sources, console)
        failed = any(p.error for p in prepared.values())
        if opts.push is not None and not failed:
            failed = not push_images(matrix, setup, sources, opts, console)
    finally:
        setup.close()
    return EXIT_FAILED_CELLS if failed else EXIT_OK


def push_images(matrix: Matrix, setup: Setup, sources: list[Source], opts: Options,
                console: Console) -> bool:
    """Push the images of the image folders to opts.push and write the digests that name them
    to <results-dir>/<name>/images.json (environment -> reference, lock, recipe, image id)."""
    from .environments import images

    executor = setup.executor
    pushed: dict[str, dict[str, Any]] = {}
    ok = True
    for source in sources:
        if source.existing or source.by_digest:
            continue
        try:
            pushed[source.key] = executor.push(source, opts.push)
        except images.ImageError as exc:
            console.print(f"[red]✗ {escape(str(exc))}[/]", soft_wrap=True)
            ok = False
            continue
        console.print(f"[green]✓[/] pushed {escape(source.key)}: "
                      f"{escape(pushed[source.key]['image'])}", soft_wrap=True)
    target = opts.results_dir / matrix.spec.run.name / "images.json"
    earlier = read_pushed(target)
    same_registry = earlier.get("registry") == opts.push
    environments = dict(earlier.get("environments", {})) if same_registry else {}
    environments |= {name: pushed[env.image] for name, env in matrix.spec.environments.items()
                     if env.image in pushed}
    if pushed:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target, {
            "schema": 1, "registry": opts.push, "matrix": str(matrix.path),
            "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "environments": environments})
        console.print(f"digests: {escape(str(target))} (an environment runs exactly its "
                      f"image with image = \"REGISTRY/NAME@sha256:…\")", soft_wrap=True)
    return ok


def read_pushed(target: Path) -> dict[str, Any]:
    """images.json of earlier pushes ({} when there is none); UsageError when it is damaged."""
    if not target.is_file():
        return {}
    try:
        earlier = json.loads(target.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{target}: not valid JSON ({type(exc).__name__}); move it away to "
                         "start a new one") from None
    if not isinstance(earlier, dict) or not isinstance(earlier.get("environments", {}), dict):
        raise UsageError(f"{target}: not an images.json of runner build --push")
    return earlier


def report_only(run_dir: Path, console: Console) -> int:
    """`runner report RUN_DIR`: rebuild the merged outputs of a run from its cell records."""
    store = Store.open(run_dir, lock=False)
    manifest = store.read_manifest()
    summaries = write_reports(store, manifest)
    for table in tables(summaries, escape(f"{manifest.get('name')} ({store.root})")):
        console.print(table)
    console.print(f"report: {escape(str(store.root / 'report.md'))}", soft_wrap=True)
    return EXIT_OK
