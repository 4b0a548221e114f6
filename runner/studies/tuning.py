"""`python -m runner tune MATRIX`: the tuned tier's search (docs/tuned.md), from above the run
pipeline. For each cell the matrix asks for at tier = "tuned" (its defaults cell, that is), the
knobs its API's record declares that apply to it (catalog/knobs.py) are searched within the same
budget for every environment (tuning_search.py); each probe is a fresh worker process — the
cell's warm-up, then a short timed window — whose record is kept in the tuning folder
(results/data/tuning.py) with every probe listed in probes.jsonl and the chosen knobs in
tuned.toml, written after each cell (a stop keeps every finished cell; `--resume` replays the
probes it has and runs only the rest). A run then measures the tuned cells with those knobs
beside their defaults (run/tiers.py): probe times, selected from several, never reach a table."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EXIT_OK, UsageError, interrupted_exit_code, user_text
from ..results.analysis import answers
from ..results.analysis.summaries import cell_summaries
from ..results.data import tuning as stored
from ..results.data.store import Store
from ..results.data.types import Record
from ..run import pipeline, tiers
from ..run.cells import run_entry
from ..run.plan import Entry, make_plan, matches
from ..run.preparing import prepare_environments
from ..run.state import RunState
from ..schema import tuning as settings
from ..schema.matrix import Cell
from ..timestamps import iso_now
from ..worker.catalog import Knob
from ..worker.catalog.knobs import BATCH_SIZE, blocked, changed
from . import tuning_batch, tuning_search
from .tuning_search import Probe


@dataclass
class Tuner:
    """What `tune` knows beside the run's state: its budget, the folder, every cell's result."""

    budget_minutes: float | None = None       # --budget-minutes (else [tuning], else default)
    resume: Path | bool | None = None
    store: Store | None = None
    results: dict[str, stored.Tuned] = field(default_factory=dict)
    started_at: str = field(default_factory=iso_now)
    interrupted: KeyboardInterrupt | None = None

    def budget_s(self, state: RunState, gpu: bool) -> float:
        minutes = self.budget_minutes or state.matrix.spec.tuning.budget_minutes or (
            settings.GPU_BUDGET_MINUTES if gpu else settings.CPU_BUDGET_MINUTES)
        return minutes * 60.0


def choose_cells(state: RunState) -> None:
    """The defaults cell of every tuned cell --only selects (one repeat each: the plan of what
    is tuned); none is bad input."""
    tuned = [c for c in state.matrix.cells if c.axes.tier == tiers.TUNED]
    if not tuned:
        raise UsageError(f"{state.matrix.path}: no cell asks for the tuned tier: add tier = "
                         "[\"defaults\", \"tuned\"] to a benchmark (docs/tuned.md)")
    twins = [dataclasses.replace(tiers.defaults_twin(c), repeats=1) for c in tuned]
    selected = [c for c in twins if not state.opts.only or matches(c, state.opts.only)]
    if not selected:
        raise UsageError(f"--only {' '.join(state.opts.only)}: no tuned cell of "
                         f"{state.matrix.path} matches")
    state.decide(plan=make_plan(selected))


def show_knobs(state: RunState, tuner: Tuner) -> None:
    """Per cell: its knobs and the budget; then what the whole tuning may take."""
    most = 0.0
    for cell in state.plan.cells:
        knobs = tiers.knobs_of(state.setup, cell, state.matrix.spec.tuning.knobs)
        gpu = tiers.gpu_model(state.setup, cell) != "cpu"
        line = ", ".join(f"{k.name} ({'/'.join(map(str, k.values_on('gpu' if gpu else 'cpu')))})"
                         for k in knobs) or "none (its tuned cell is its defaults)"
        if tiers.batch_searched(state.matrix.spec.tuning, cell):
            line = (f"the batch ({cell.batch_size} up to "
                    f"{cell.batch_size * state.matrix.spec.tuning.max_batch_factor}), then "
                    + (line if knobs else "no knob"))
        state.console.print(f"tune: {user_text(cell.name)}: {user_text(line)}; budget "
                            f"{tuner.budget_s(state, gpu) / 60:g} min", soft_wrap=True)
        most += tuner.budget_s(state, gpu) / 60 \
            if knobs or tiers.batch_searched(state.matrix.spec.tuning, cell) else 0.0
    state.console.print(f"tune: {len(state.plan.cells)} cell(s), at most {most:g} min of probes "
                        "(each cell's budget, start-up and compilation included)", soft_wrap=True)


def open_folder(state: RunState, tuner: Tuner) -> None:
    """A new tuning folder, or --resume's (the newest of the matrix's, or the one named)."""
    name = state.matrix.spec.run.name
    if tuner.resume:
        root = tuner.resume if isinstance(tuner.resume, Path) else next(
            iter(stored.tuning_folders(state.opts.results_dir, name)), None)
        if root is None or not (Path(root) / stored.MANIFEST).is_file():
            raise UsageError(f"--resume: no tuning folder of {name!r} to continue"
                             + (f" ({root} has no {stored.MANIFEST})" if root else ""))
        store = Store(Path(root).expanduser().resolve())
        store.check_links()
        store.lock()
        store.ledger.hold()
        tuner.results = stored.read_tuned(store.root)
    else:
        store = Store.create(f"{name}/{stored.FOLDER}", state.opts.results_dir)
    state.cleanup.callback(store.close)
    tuner.store = store
    write_manifest(state, tuner, ended=None)
    state.console.print(f"tuning folder: {user_text(str(store.root))}", soft_wrap=True)


def write_manifest(state: RunState, tuner: Tuner, ended: str | None) -> None:
    assert tuner.store is not None
    lanes = state.setup.lanes()[0]
    state_of = {"matrix": str(state.matrix.path), "name": state.matrix.spec.run.name,
                "profile": state.matrix.profile, "executor": state.setup.executor.name,
                "gpu": lanes[0].gpu.name if lanes[0].gpu is not None else None,
                "cells": [c.name for c in state.plan.cells], "started_at": tuner.started_at,
                "budget_minutes": tuner.budget_minutes or state.matrix.spec.tuning.budget_minutes,
                "window_s": state.matrix.spec.tuning.window, "ended": ended}
    tuner.store.write_text(stored.MANIFEST, json.dumps(state_of, indent=1))


def tune_cells(state: RunState, tuner: Tuner) -> None:
    """Every selected cell's search, its result written as soon as it ends."""
    assert tuner.store is not None
    for cell in state.plan.cells:
        if cell.name in tuner.results and tuner.results[cell.name].status != stored.NOTHING_RAN:
            state.console.print(f"tune: {user_text(cell.name)}: done in "
                                f"{user_text(str(tuner.store.root))}", soft_wrap=True)
            continue
        tuner.results[cell.name] = tune_one(state, tuner, cell)
        stored.write_tuned(tuner.store.root, tuner.results, str(state.matrix.path))
        show_result(state, tuner.results[cell.name])


def tune_one(state: RunState, tuner: Tuner, cell: Cell) -> stored.Tuned:
    setup = state.setup
    knobs = tiers.knobs_of(setup, cell, state.matrix.spec.tuning.knobs)
    gpu = tiers.gpu_model(setup, cell)
    stack = tiers.stack_of(setup, setup.source_of(cell))
    searched = tiers.batch_searched(state.matrix.spec.tuning, cell)
    if not knobs and not searched:
        return stored.Tuned(cell.name, gpu, stack, status=stored.NO_KNOBS)
    device = "cpu" if gpu == "cpu" else "gpu"
    budget_s = tuner.budget_s(state, device == "gpu")
    fixed, batch = ({}, None) if not searched else search_batch(state, tuner, cell, budget_s)
    prober = Prober(state, tuner, cell, knobs, fixed, batch.lines if batch else None)
    spent_s = batch.spent_s if batch else 0.0
    workload = cell.workload if cell.user_workload is None else cell.user_workload.workload
    outcome = tuning_search.search(knobs, device, lambda setting: blocked(
        knobs, setting, workload, cell.api, cell.backend, cell.axes, cell.task,
        fixed.get("batch_size", cell.batch_size), cell.options),
        prober.run, budget_s - spent_s, state.matrix.spec.tuning.window)
    winner = outcome.winner
    chosen = {**fixed, **(changed(knobs, winner.setting) if winner is not None else {})}
    status = (stored.NOTHING_RAN if winner is None else stored.BUDGET_SPENT
              if outcome.budget_spent or (batch and batch.budget_spent)
              else stored.DEFAULTS_WON if not chosen else stored.TUNED_STATUS)
    usd = [p.usd for p in (prober, batch) if p is not None and p.priced]
    return stored.Tuned(cell.name, gpu, stack, chosen, status, len(prober.lines),
                        round((outcome.spent_s + spent_s) / 60.0, 3), round(budget_s / 60.0, 3),
                        sum(usd) if usd else None, probe_gain(outcome))


def search_batch(state: RunState, tuner: Tuner, cell: Cell,
                 budget_s: float) -> tuple[dict[str, Any], Prober]:
    """The batch search's probes (tuning_batch.py) at the defaults' knobs: the batch kept as a
    fixed knob of the search that follows ({} where it is the cell's own), and its prober."""
    prober = Prober(state, tuner, cell, [BATCH_SIZE], compare_answers=False)
    window = state.matrix.spec.tuning.window
    ceiling = cell.batch_size * state.matrix.spec.tuning.max_batch_factor

    def fits() -> bool:
        walls = [line["wall_s"] or 0.0 for line in prober.lines]
        mean = sum(walls) / len(walls) if walls else 0.0
        return prober.spent_s + mean + window <= budget_s

    found = tuning_batch.search_batch(
        cell.batch_size, ceiling, lambda batch: prober.run({"batch_size": batch}, 0, window), fits)
    prober.budget_spent, chosen = found.budget_spent, found.chosen
    state.console.print(f"  batch {user_text(cell.name)}: " + (
        f"{found.chosen} kept (the largest that ran: {found.largest_ok}"
        + (f"; {found.smallest_failed} failed)" if found.smallest_failed else ", the ceiling)")
        if found.chosen is not None else "not even the cell's own batch ran"), soft_wrap=True)
    return ({"batch_size": chosen} if chosen and chosen != cell.batch_size else {}), prober


def probe_gain(outcome: tuning_search.Outcome) -> float | None:
    """Defaults ÷ winner, both at the first rung (a probe's figure: selected, so biased)."""
    first = {tuning_search.key(p.setting): p for p in outcome.probes if p.rung == 0 and p.ok}
    defaults, winner = outcome.defaults, outcome.winner
    if defaults is None or winner is None or not defaults.ok:
        return None
    best = first.get(tuning_search.key(winner.setting))
    return round((defaults.ms or 0) / best.ms, 4) if best is not None and best.ms else None


class Prober:
    """Runs a cell's probes: each a fresh worker process of the cell with a setting's knobs
    (a probe the folder already holds is read back, not run), judged against the defaults'
    answer, listed in probes.jsonl."""

    def __init__(self, state: RunState, tuner: Tuner, cell: Cell, knobs: list[Knob],
                 fixed: Mapping[str, Any] | None = None,
                 lines: list[dict[str, Any]] | None = None, compare_answers: bool = True):
        self.state, self.tuner, self.cell, self.knobs = state, tuner, cell, knobs
        self.fixed = dict(fixed or {})          # knobs every probe carries (the batch kept)
        self.lines: list[dict[str, Any]] = [] if lines is None else lines   # probes.jsonl's
        self.compare_answers = compare_answers
        self.reference: Record | None = None
        self.usd, self.priced = 0.0, False
        self.spent_s, self.budget_spent = 0.0, False

    def probe_cell(self, setting: Mapping[str, Any], window: float) -> Cell:
        twin = self.cell
        return dataclasses.replace(
            twin, tuning={**self.fixed, **changed(self.knobs, setting)}, steps="auto",
            repeats=1,
            settings={**twin.settings, "min_time_s": window, "max_time_s": max(4 * window, 5.0)})

    def run(self, setting: dict[str, Any], rung: int, window: float) -> Probe:
        store = self.tuner.store
        assert store is not None
        entry = Entry(self.probe_cell(setting, window), rung + 1)
        record = self.stored(entry) or self.measure(entry)
        probe = self.judge(setting, rung, window, record)
        self.lines.append(line_of(len(self.lines) + 1, probe, record, entry,
                                  self.knobs, self.fixed))
        stored.write_probes(store.root, self.cell.id, self.lines)
        self.state.console.print(progress_line(self.cell, probe, self.knobs, self.lines),
                                 soft_wrap=True)
        return probe

    def stored(self, entry: Entry) -> Record | None:
        store = self.tuner.store
        assert store is not None
        path = store.record_path(entry.key)
        if not path.is_file():
            return None
        record, _ = store.read_record(path)
        return record

    def measure(self, entry: Entry) -> Record:
        setup, store = self.state.setup, self.tuner.store
        assert store is not None
        source = setup.source_of(entry.cell)
        pace = self.state.progress.pace
        return run_entry(setup.executor_for(source), entry,
                         self.state.progress.prepared[source.key], store,
                         self.state.matrix.spec.run.seed, lane=setup.lanes()[0][0],
                         usd_per_s=pace.usd_per_s() if pace else None)

    def judge(self, setting: dict[str, Any], rung: int, window: float, record: Record) -> Probe:
        wall = float(record.get("wall_s") or 0.0)
        self.spent_s += wall
        if record.get("usd") is not None:
            self.usd, self.priced = self.usd + float(record["usd"] or 0.0), True
        if record["status"] != "ok":
            reason = (record.get("error") or record["status"]).strip().splitlines()
            return Probe(setting, rung, window, record["status"], None, wall,
                         reason[-1][:300] if reason else record["status"])
        if not self.compare_answers:         # the batch search: every probe its own inputs
            pass
        elif self.reference is None:
            self.reference = record          # the first probe ok: the defaults, as a rule
        else:
            differs = answer_differs(self.reference, record)
            if differs:
                return Probe(setting, rung, window, "different answer", record.get("median_ms"),
                             wall, differs)
        return Probe(setting, rung, window, "ok", record.get("median_ms"), wall)


def answer_differs(reference: Record, record: Record) -> str:
    """What of a probe's answer differs from the reference's beyond the looser tolerance of
    their arithmetic (answers.py), "" when it agrees or either has no answer."""
    expected, got = reference.get("answer"), record.get("answer")
    if not expected or not got:
        return ""
    a, b = cell_summaries([reference])[0], cell_summaries([record])[0]
    kind = max(answers.arithmetic(a), answers.arithmetic(b), key=answers.TOLERANCES.__getitem__)
    found, _ = answers.differences(expected, got, kind)
    return "; ".join(found)[:500]


def line_of(number: int, probe: Probe, record: Record, entry: Entry,
            knobs: list[Knob], fixed: Mapping[str, Any]) -> dict[str, Any]:
    """A probe as probes.jsonl lists it."""
    return {"probe": number, "rung": probe.rung, "window_s": probe.window_s,
            "knobs": {**fixed, **changed(knobs, probe.setting)}, "status": probe.status,
            "ms_per_step": probe.ms, "compile_s": record.get("compile_s"),
            "wall_s": probe.wall_s, "rss_peak_mb": record.get("rss_peak_mb"),
            "vram_peak_mb": record.get("vram_peak_mb"),
            "pruned": None if probe.ok else f"{probe.status}: {probe.reason}".rstrip(": "),
            "record": f"cells/{entry.key}.json"}


def knobs_text(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "defaults"


def progress_line(cell: Cell, probe: Probe, knobs: list[Knob],
                  lines: list[dict[str, Any]]) -> str:
    spent = sum(line["wall_s"] for line in lines) / 60.0
    what = (f"{probe.ms:.4g} ms/step" if probe.ok and probe.ms is not None
            else f"[yellow]pruned: {user_text(probe.status)}[/] {user_text(probe.reason[:120])}")
    return (f"  probe {len(lines)} r{probe.rung} {user_text(cell.name)} "
            f"{user_text(knobs_text(lines[-1]['knobs']))}: {what} "
            f"({spent:.1f} min spent)")


def show_result(state: RunState, result: stored.Tuned) -> None:
    # Selected, short-window probe times: a hint, never a measurement (the run re-measures)
    gain = f", first probes: defaults ÷ winner {result.probe_gain:.3g}" \
        if result.probe_gain else ""
    state.console.print(f"[bold]tuned[/] {user_text(result.cell)}: {user_text(result.status)}: "
                        f"{user_text(knobs_text(result.knobs))} ({result.probes} probes, "
                        f"{result.minutes:.1f} min{gain})", soft_wrap=True)


def tune(state: RunState, tuner: Tuner, dry_run: bool) -> int:
    """The command: the matrix and its tuned cells, their environments, every search."""
    for step in (pipeline.load_matrix, pipeline.lock_clocks, choose_cells,
                 pipeline.resolve_stacks, pipeline.choose_sources, pipeline.show_setup):
        step(state)
    show_knobs(state, tuner)
    if dry_run:
        return EXIT_OK
    open_folder(state, tuner)
    try:
        prepare_environments(state)
        tune_cells(state, tuner)
    except KeyboardInterrupt as exc:
        tuner.interrupted = exc
        state.console.print(f"[yellow]interrupted: finished cells are kept in tuned.toml; "
                            f"continue with: python -m runner tune {user_text(str(state.matrix.path))} "
                            f"--resume {user_text(str(tuner.store.root if tuner.store else ''))}[/]",
                            soft_wrap=True)
    finally:
        write_manifest(state, tuner, ended="interrupted" if tuner.interrupted else "finished")
    if tuner.interrupted is not None:
        return interrupted_exit_code(tuner.interrupted)
    assert tuner.store is not None
    state.console.print(f"tuned.toml: {user_text(str(tuner.store.root / stored.TUNED))}; run "
                        f"the tiers with: python -m runner {user_text(str(state.matrix.path))}",
                        soft_wrap=True)
    return EXIT_OK
