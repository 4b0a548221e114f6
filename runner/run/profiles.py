"""Profiled passes: after a cell's timed repeats, one more worker process of the same spec runs
it under its framework's profiler (runner/worker/profiling/) — never a repeat: its step times
are the profile's alone. The cells are those `--profile-cells` and [profiling] cells name (a
name, glob or id, as --only) that finished at least one repeat ok; one that already has a
profile is not profiled again (a resumed run, `profile` run twice). A pass that fails is a
warning with its log, never a failed cell. In a run the passes are in its estimate (planned),
its time and what it spent, and a cap (--budget, --max-hours) stops before a pass would pass
it, as before a cell × repeat."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from ..errors import UsageError, user_text
from ..executors.base import Attempt, Executor, Outcome, Prepared, write_spec
from ..results.analysis.summaries import row_label
from ..results.data import profiles as stored, records as record_mod
from ..results.data.store import Store
from ..results.data.types import Record
from ..schema.matrix import Cell
from ..schema.user_workloads import STAGED
from ..worker import catalog
from .cells import RunStopped, attempt_for, cell_spec, stop_if_lost
from .console import cell_label
from .pace import Pace
from .plan import Entry, matches
from .setup import Setup
from .state import RunState


def step(state: RunState) -> None:
    """A pipeline step: a profiled pass of each planned cell that `--profile-cells` or
    [profiling] cells name, after the timed repeats (a line when none is left to profile)."""
    profiling = state.matrix.spec.profiling
    patterns = patterns_of(state)
    cells = cells_to_profile(state.plan.cells, state.store.records(), patterns, state.store.root,
                             state.store.ledger)
    if patterns and not cells:
        state.console.print("◷ profile: no cell to profile (the cells named have no ok repeat, "
                            "run on several devices, or have a profile already)", soft_wrap=True)
    for cell in [c for c in cells if no_profiler(c)]:
        state.console.print(f"profile: {cell_label(cell.name)} not profiled: "
                            f"{user_text(str(no_profiler(cell)))}", soft_wrap=True)
    cells = [c for c in cells if not no_profiler(c)]
    run_profiles(state.setup, cells, state.progress.prepared, state.store,
                 profiling.worker_settings(), state.matrix.spec.run.seed, state.console,
                 state.progress.pace)


def refuse_unmatched(state: RunState, flag: str = "--profile-cells") -> None:
    """Each pattern `flag` gives names a cell of the plan, as --only's must (UsageError)."""
    for pattern in state.opts.profile_cells:
        if not any(matches(cell, [pattern]) for cell in state.plan.cells):
            raise UsageError(f"{flag} {pattern}: no cell of {state.matrix.path} matches")


def patterns_of(state: RunState) -> list[str]:
    return [*state.opts.profile_cells, *state.matrix.spec.profiling.cells]


def profile_entry(cell: Cell) -> Entry:
    """A profiled pass as the estimate and the pace count it (repeat 0: no timed repeat's)."""
    return Entry(cell, 0)


def planned(state: RunState) -> list[Cell]:
    """The cells the run will profile after their repeats, before it runs (its plan and
    estimate): the named cells with a profiler and without a finished profile, whether or not
    their repeats will end ok."""
    store = state.progress.store
    return [c for c in cells_to_profile(state.plan.cells, None, patterns_of(state),
                                        store.root if store else None,
                                        store.ledger if store else None)
            if not no_profiler(c)]


def say_planned(state: RunState) -> None:
    """The plan's line naming the cells it profiles after their repeats (10 of them at most)."""
    profiled = planned(state)
    if profiled:
        more = f", and {len(profiled) - 10} more" if len(profiled) > 10 else ""
        state.console.print(f"profiled after their repeats ({len(profiled)}): "
                            + ", ".join(user_text(c.name) for c in profiled[:10]) + more,
                            soft_wrap=True)


def cells_to_profile(cells: Sequence[Cell], records: Sequence[Mapping[str, Any]] | None,
                     patterns: list[str], root: Any, ledger: Any = None) -> list[Cell]:
    """The named cells that have an ok repeat (any, with `records` None) and no finished
    profile, in the matrix's order; one-device cells only (a profiled pass runs on one lane;
    docs/scaling.md)."""
    if not patterns:
        return []
    ok = None if records is None else {r["cell_id"] for r in records if r.get("status") == "ok"}
    return [c for c in cells if not c.not_applicable and (ok is None or c.id in ok)
            and matches(c, patterns) and c.axes.devices == 1
            and (root is None or not stored.has_profile(root, c.id, ledger))]


def no_profiler(cell: Cell) -> str | None:
    """Why a cell's engine has no profiler (its API's record), or None when it has one."""
    engine = catalog.api(cell.api, cell.backend).engine_record
    if engine is None:
        return f"{cell.api} has no engine known for backend {cell.backend!r}"
    return None if engine.profiler else engine.profiler.reason


def timed_median(records: Sequence[Mapping[str, Any]], cell_id: str) -> float | None:
    """The cell's timed step (the median of its ok repeats' medians), ms."""
    medians = [r["median_ms"] for r in records if r.get("cell_id") == cell_id
               and r.get("status") == "ok" and r.get("median_ms")]
    return statistics.median(medians) if medians else None


def run_profiles(setup: Setup, cells: list[Cell], prepared: dict[str, Prepared], store: Store,
                 settings: dict[str, Any], seed: int, console: Console,
                 pace: Pace | None = None) -> None:
    """One profiled pass per cell, in turn on the run's first lane; a line for each. With a
    pace, a cap stops before a pass that would pass it (RunStopped, by the cap), and each
    pass counts in what the run spent."""
    if not cells:
        return
    records = store.records()
    lane = setup.lanes()[0][0]
    for number, cell in enumerate(cells, 1):
        if pace is not None:
            reason = pace.gate(profile_entry(cell))
            if reason is not None:
                raise RunStopped(reason, cell.name, by=pace.stopped_by or "budget")
        source = setup.source_of(cell)
        executor = setup.executor_for(source)
        ready = prepared.get(source.key)
        if ready is None:
            ready = prepared[source.key] = executor.prepare(source, lambda line: None)
        with console.status(f"profile {number}/{len(cells)}: {user_text(cell.name)}"):
            profile = profile_one(executor, ready, cell, store, settings, seed, lane, records)
        console.print(profile_line(cell, profile), soft_wrap=True, highlight=False)
        if pace is not None:
            pace.done(profile_entry(cell))
        stop_if_lost(executor)


def profile_one(executor: Executor, prepared: Prepared, cell: Cell, store: Store,
                settings: dict[str, Any], seed: int, lane: Any,
                records: Sequence[Record]) -> dict[str, Any]:
    """Run the cell's profiled pass and write profiles/<cell>/: its profile.json."""
    key = f"{cell.id}-profile"
    work = store.work_dir(key)
    spec = dataclasses.replace(cell_spec(cell, 0, store.run_id, seed, str(work / "result.json")),
                               profile_pass=settings)
    worker: record_mod.WorkerReply
    if prepared.error:
        outcome, worker = Outcome(None, False, 0.0), record_mod.failed_result(spec, prepared.error)
    else:
        store.log_path(key).unlink(missing_ok=True)
        attempt: Attempt = attempt_for(Entry(cell, 0), spec, work, store.log_path(key), lane,
                                       lane.placement(), lambda text: None)
        if cell.user_workload is not None:
            attempt.staged_code = store.root / STAGED
        write_spec(attempt)
        outcome = executor.run(prepared, attempt)
        worker = record_mod.read_worker_result(attempt.result_path, spec)
    profile, kernels, trace = profile_of(cell, worker, outcome, settings,
                                         timed_median(records, cell.id), records)
    profile["log"] = f"logs/{key}.log"
    stored.write_profile(store.root, cell.id, profile, kernels, trace, store.ledger)
    return {**profile, "kernels": kernels}


def profile_of(cell: Cell, worker: record_mod.WorkerReply, outcome: Outcome,
               settings: dict[str, Any], timed_ms: float | None,
               records: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], Any, bytes | None]:
    """profile.json, kernels.json and the trace from what the worker handed back."""
    first = next((r for r in records if r.get("cell_id") == cell.id and r.get("status") == "ok"),
                 {"workload": cell.workload, "task": cell.task, **cell.axes,
                  "options": cell.options})
    base: dict[str, Any] = {
        "cell_id": cell.id, "cell_name": cell.name, "environment": cell.environment,
        "api": cell.api, "backend": cell.backend, "workload": cell.workload, "task": cell.task,
        "batch_size": cell.batch_size, "row": row_label(first), "settings": settings,
        "timed_median_ms": timed_ms, "wall_s": outcome.wall_s}
    if isinstance(worker, record_mod.Unusable):
        why = f"the worker's result.json is not a valid result ({worker.problem})"
        return {**base, "status": "failed", "error": why[-2000:]}, None, None
    captured = worker["profile"] if worker is not None else None
    if worker is None or worker["status"] != "ok" or not isinstance(captured, dict):
        why = (worker["error"] if worker is not None else None) or (
            "timed out" if outcome.timed_out else
            f"the worker exited {outcome.returncode} without a profile")
        return {**base, "status": "failed", "error": str(why)[-2000:]}, None, None
    profiled, reference, overhead = profiler_cost(captured)
    kernels = stored.clean_kernels(captured.get("kernels"))
    trace = stored.trace_bytes(captured.get("trace_gz_b64"), float(settings["max_trace_mb"]))
    warnings = []
    if overhead is not None and overhead > stored.OVERHEAD_WARNING:
        warnings.append(f"profiled steps took {overhead:.2f}× the same steps unprofiled: the "
                        "profiler slows this cell; read its shares, not its absolute times")
    drift = reference_drift(captured)
    if drift is not None and max(drift, 1 / drift) > stored.OVERHEAD_WARNING:
        warnings.append(f"the unprofiled steps after the profiled ones took {drift:.2f}× those "
                        "before: the process drifted, so the profiler's ratio is uncertain")
    if captured.get("truncated"):
        warnings.append(str(captured["truncated"])[:300])
    return ({**base, "status": "ok", "error": None, "source": str(captured.get("source"))[:40],
             "steps": captured.get("steps"), "warmup": captured.get("warmup"),
             "step_ms": [stored.finite_number(v) for v in captured.get("step_ms") or []],
             "profiled_step_ms": profiled, "reference_step_ms": reference,
             "profile_overhead": overhead, "reference_drift": drift,
             "sync": str(captured.get("sync") or "")[:200],
             "device": (kernels or {}).get("device"), "warnings": warnings},
            kernels, trace)


def profiler_cost(captured: Mapping[str, Any]) -> tuple[float | None, float | None,
                                                        float | None]:
    """(the profiled step, the same steps unprofiled, their ratio: the profiler's own cost),
    ms: both medians of the worker's pass, timed in one process with the device synchronised
    after every call (never against the timed repeats, which synchronise once per block and
    ran in other processes)."""
    profiled = stored.finite_number(captured.get("profiled_step_ms"))
    steps = _positive(captured.get("reference_step_ms"))
    reference = statistics.median(steps) if steps else None
    return profiled, reference, (profiled / reference if profiled and reference else None)


def reference_drift(captured: Mapping[str, Any]) -> float | None:
    """The unprofiled steps after the profiled ones over those before (1: the process did not
    drift while it was profiled; far from 1, the ratio above is as uncertain)."""
    before, after = (_positive(captured.get(key))
                     for key in ("reference_before_ms", "reference_after_ms"))
    return statistics.median(after) / statistics.median(before) if before and after else None


def _positive(raw: Any) -> list[float]:
    if not isinstance(raw, list):
        return []
    return [v for v in (stored.finite_number(x) for x in raw) if v is not None and v > 0]


def profile_line(cell: Cell, profile: Mapping[str, Any]) -> str:
    """One line per profiled cell: its figures, or why it has none."""
    name = cell_label(cell.name)
    if profile.get("status") != "ok":
        error = user_text(str(profile.get("error") or "").strip().splitlines()[-1:][0][:200]
                          if profile.get("error") else "failed")
        return f"[yellow]! profile {name}: {error} (log: {user_text(profile['log'])})[/]"
    kernels = profile.get("kernels") or {}
    overhead = profile.get("profile_overhead")
    idle = kernels.get("device_idle_pct")
    return (f"◷ profile {name}: {profile['profiled_step_ms']:.3g} ms/step profiled"
            + (f" (×{overhead:.2f} unprofiled)" if overhead else "")
            + (f", {kernels['launches_per_step']:.0f} launches/step"
               if kernels.get("launches_per_step") is not None else "")
            + (f", {idle:.0f} % idle" if idle is not None else "")
            + (" [yellow]![/]" if profile.get("warnings") else ""))
