"""The run as named steps over one state (nox's `workflow.execute((task, task, …))`):

    load matrix → lock clocks → open store → plan → derived stacks → show setup → start run
    → measure (prepare environments → calibrate → run cells) → write reports → history

Each step takes the RunState and updates it: what it decides as a new frozen Decisions
(state.decide), what it does (run folder, environments, manifest, summaries, how the run stopped)
in state.progress; a step that returns an exit code ends the run with it. The commands compose
them: `run` and `plan` take RUN, `reproduce` and doctor's measuring runs take CELLS (their matrix
and setup made by them), `build` and `export` the first steps and their own. Every failure of a
cell becomes a record with a status; only invalid input stops the run before anything is written
(exit code 2)."""

from __future__ import annotations

import contextlib
from typing import Any
from collections.abc import Sequence

from ..environments import stacks
from ..errors import (EXIT_FAILED_CELLS, EXIT_OK, UsageError, interrupted_exit_code,
                      interruption, os_error_line, signals_held, user_text)
from ..machine import gpustate, hostinfo
from ..paths import folder_in_run
from ..results.analysis.report_model import analyse_run, build as build_report
from ..results.data.store import Store
from ..results.render.write import write_reports
from ..schema import matrix as matrix_mod, user_workloads
from . import console as show, devices, profiles, resume, tiers, manifest as manifest_mod
from .cells import RunStopped, record_not_applicable, run_calibration, run_cells
from .costing import estimate_the_run, price_the_run, start_the_meter
from .places import results_folder
from .preparing import prepare_environments
from .plan import make_plan
from .recording import history_destination, say_not_recorded, write_history
from .setup import choose_setup, resolve_stacks as resolve
from .state import Decisions, Options, RunState, Step

__all__ = ["CELLS", "MEASURE", "RUN", "Decisions", "Options", "RunState", "Step", "execute"]


def execute(steps: Sequence[Step], state: RunState) -> int:
    """Run the steps in order; the first exit code a step returns ends the run."""
    with state.cleanup:
        for step in steps:
            code = step(state)
            if code is not None:
                return code
    return EXIT_OK


# --- before anything is written -----------------------------------------------------------------

def load_matrix(state: RunState) -> None:
    """The matrix and the run's setup. With an executor that places cells on a cluster,
    profile = "auto" looks at the cluster's GPUs, not at the machine the runner started on."""
    opts = state.opts
    matrix = matrix_mod.load(opts.matrix_path, opts.profile, gpu_found=hostinfo.gpu_found())
    setup = choose_setup(matrix, opts.executor, opts.parallel, opts.ray_address)
    state.cleanup.callback(setup.close)   # also when the input turns out bad after Ray joined
    cluster = setup.executor.cluster()
    if cluster is not None and matrix.profile_reason.startswith("auto"):
        cluster_gpus = cluster["gpus"]
        matrix = matrix_mod.load(opts.matrix_path, opts.profile, gpu_found=bool(cluster_gpus))
        matrix.profile_reason = f"auto: the Ray cluster has {cluster_gpus} GPUs" + \
            ("" if cluster_gpus else ", so the smoke profile is in force")
    show.show_profile(matrix, state.console)
    state.decided = Decisions(matrix, setup)


def lock_clocks(state: RunState) -> None:
    """[run] lock_clocks for the rest of the run: the run's GPUs locked (setup.clocks says how),
    reset however it ends; a refusal is one line, exit 2, before anything is written."""
    if state.opts.dry_run:
        return
    matrix, setup = state.matrix, state.setup
    setting = matrix.spec.run.lock_clocks
    if setting is not False and not setup.executor.on_this_host:
        raise UsageError(f"{matrix.path}: run.lock_clocks: locks this host's GPUs; with the "
                         f"{setup.executor.name} executor lock them on each node (sudo nvidia-smi "
                         "-lgc) instead")
    device_ids = setup.gpu_device_ids() if setting is not False else []

    def notify(text: str) -> None:
        state.console.print(f"[bold]clocks:[/] {user_text(text)}", soft_wrap=True)

    setup.clocks = state.cleanup.enter_context(
        gpustate.locked_clocks(setting, device_ids, notify))


def open_resumed_store(state: RunState) -> None:
    """--resume: the run's own folder, checked before the plan skips its finished cells."""
    if state.opts.resume and not state.opts.dry_run:
        state.progress.store = resume.open_resumed(state.matrix, state.opts.resume,
                                                   state.opts.results_dir, state.console)
        state.cleanup.callback(state.store.close)


def plan_cells(state: RunState) -> None:
    finished = state.store.finished() if state.progress.store is not None else set()
    cells, tuned = tiers.attach(state.setup, devices.fit_to_machine(state.setup,
                                                                    state.matrix.cells),
                                state.opts.tuning, results_folder(state),
                                state.matrix.spec.run.name, state.matrix.path,
                                state.matrix.spec.tuning)
    state.matrix.cells = cells
    state.decide(plan=make_plan(cells, state.opts.only, finished), tuned=tuned)


def refuse_an_empty_selection(state: RunState) -> None:
    opts, plan = state.opts, state.plan
    if opts.only and not plan.to_run and not plan.done and not plan.not_applicable:
        raise UsageError(f"--only {' '.join(opts.only)}: no cell of {state.matrix.path} matches")
    profiles.refuse_unmatched(state)


def plan_calibrations(state: RunState) -> None:
    """[run] calibrate: the calibrations of the environments the plan's cells use (--only
    narrows them), never of an environment no selected cell runs in."""
    used = {cell.environment for cell in state.plan.cells}
    state.decide(calibrations=tuple(c for c in state.matrix.calibration
                                    if c.environment in used))


def resolve_stacks(state: RunState) -> None:
    """The derived stacks the plan's cells (and calibrations) use, each resolved into its lock
    (a resumed run's own); one that cannot be is bad input, before anything is built."""
    names = [c.environment for c in [*state.plan.cells, *state.calibrations]]

    def note(line: str) -> None:
        state.console.print(f"[yellow]![/] {user_text(line)}", soft_wrap=True)

    resolve(state.setup, state.matrix, list(dict.fromkeys(names)),
            state.progress.store.root if state.progress.store is not None else None, note)


def choose_sources(state: RunState) -> None:
    """Each source the planned runs (and calibrations) need, once (environments may share an
    image folder)."""
    cells = [*(e.cell for e in state.plan.to_run), *state.calibrations]
    sources = [state.setup.source_of(c) for c in cells]
    state.decide(sources=tuple({s.key: s for s in sources}.values()))


def show_setup(state: RunState) -> None:
    show.show_setup(state.matrix, state.setup, state.plan.cells, state.console,
                    show.runs_per_environment(state.plan, state.calibrations))
    show.show_preparation(state.matrix, state.setup, state.plan, state.calibrations,
                          state.console)
    if state.opts.history:
        show.show_history(*history_destination(state), state.console)


def stop_at_the_plan(state: RunState) -> int | None:
    """--dry-run (and `plan`): the plan table, nothing run or written."""
    if not state.opts.dry_run:
        return None
    state.console.print(show.plan_table(state.matrix, state.plan))
    not_applicable = show.not_applicable_table(state.plan)
    if not_applicable is not None:
        state.console.print(not_applicable)
    profiles.say_planned(state)
    return EXIT_OK


# --- the run folder -------------------------------------------------------------------------------

def open_store(state: RunState) -> None:
    """A new run folder (a resumed run has its own already)."""
    if state.progress.store is None:
        state.progress.store = Store.create(state.matrix.spec.run.name, state.opts.results_dir)
        state.cleanup.callback(state.store.close)


def start_run(state: RunState) -> None:
    """The run folder's first files: its matrix, its manifest (a resumed run's own, updated),
    the not-applicable cells."""
    matrix, store = state.matrix, state.store
    state.console.print(f"run folder: {user_text(str(store.root))}", soft_wrap=True)
    state.progress.manifest = manifest_mod.opening_manifest(
        matrix, state.plan, state.setup, store, state.progress.prepared, bool(state.opts.resume))
    manifest_mod.add_tuning(state.progress.manifest, state.decisions.tuned)
    if state.opts.blocks_from is not None:
        manifest_mod.add_blocks_from(state.progress.manifest, state.opts.blocks_from)
    show.announce_machine(state.progress.manifest, state.console)
    stage_user_workloads(matrix, store.root)
    if not state.opts.resume:                 # a resume never rewrites what the run ran
        store.write_matrix(user_workloads.staged_matrix(matrix.resolved, matrix.user_workloads))
    for name, stack in state.setup.stacks.items():     # what reproduce rebuilds
        target = stacks.run_folder_lock(store.root, name, stack.flavour)
        if not target.is_file():
            folder_in_run(store.root, *target.parent.relative_to(store.root).parts)
            store.write_text(str(target.relative_to(store.root)),
                             stack.lock.read_text(encoding="utf-8"))
            if stack.builds:
                store.write_text(str(target.with_name(stacks.BUILDS).relative_to(store.root)),
                                 stacks.builds_json(stack))
    store.write_manifest(state.progress.manifest)
    record_not_applicable(store, state.plan, store.run_id, matrix.spec.run.seed)


def stage_user_workloads(matrix: matrix_mod.Matrix, run_dir: Any) -> None:
    """A read-only copy of each user workload's code in the run folder (workloads/)."""
    try:
        user_workloads.stage(matrix.user_workloads, run_dir)
    except ValueError as exc:
        raise UsageError(f"{matrix.path}: {exc}") from None


# --- measuring ------------------------------------------------------------------------------------

def calibrate(state: RunState) -> None:
    """[run] calibrate's peaks, a peak the machine's cache holds for the same lock reused."""
    from ..machine.peak_cache import PeakCache

    manifest_mod.add_prepared(state.progress.manifest, state.matrix, state.setup,
                              state.progress.prepared)
    pace = state.progress.pace
    manifest_mod.add_calibration(state.progress.manifest, run_calibration(
        state.setup, list(state.calibrations), state.progress.prepared, state.store,
        state.matrix.spec.run.seed, state.console, PeakCache(results_folder(state)),
        state.opts.recalibrate, pace.usd_per_s() if pace else None))
    state.store.write_manifest(state.progress.manifest)


def run_planned_cells(state: RunState) -> None:
    run_cells(state.setup, state.plan, state.progress.prepared, state.store,
              state.matrix.spec.run.seed, state.console, state.progress.pace,
              state.opts.calls_per_sample, state.opts.blocks_from)


MEASURE: tuple[Step, ...] = (prepare_environments, calibrate, run_planned_cells, profiles.step)


def measure(state: RunState) -> None:
    """MEASURE, stopped early by Ctrl-C, a lost executor or a full disk (each kept in the state);
    then, however it ends, the executors closed and the reports written."""
    try:
        for step in MEASURE:
            step(state)
    except KeyboardInterrupt as exc:    # Ctrl-C, SIGTERM or SIGHUP (errors.Terminated)
        state.progress.interrupted = exc
        state.console.print(f"[yellow]interrupted: finished cells are kept; continue with: "
                            f"{user_text(resume_line(state))}[/]", soft_wrap=True)
    except RunStopped as exc:
        state.progress.stopped = exc
        if exc.record is not None:
            state.console.print(f"[red]✗[/] {user_text(exc.cell)}: "
                                f"{user_text(show.outcome_text(exc.record))}")
    except (OSError, UsageError) as exc:     # a full disk: stop, keep what is finished
        state.progress.halted = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
    finally:
        close_and_write_reports(state)


def close_and_write_reports(state: RunState) -> None:
    """The executors closed, then the manifest and reports written with Ctrl-C, SIGTERM and
    SIGHUP held: a second Ctrl-C (or one as the run ends) never costs what finished."""
    done = state.progress
    try:
        state.setup.close()
    except KeyboardInterrupt as exc:      # a second one while the executors close: go on
        done.interrupted = done.interrupted if done.interrupted is not None else exc

    def say(signum: int) -> None:
        state.console.print("[yellow]writing the manifest and reports first; they are done in "
                            "a moment[/]", soft_wrap=True)

    with signals_held(say) as held:
        write_final_reports(state)
    if held and done.interrupted is None:       # the manifest says so too
        done.interrupted = interruption(held[0])
        done.manifest["interrupted"] = True
        with signals_held(lambda signum: None), contextlib.suppress(OSError):
            state.store.write_manifest(done.manifest)


def write_final_reports(state: RunState) -> None:
    """Finalise the manifest, then the reports, in the room the run kept aside (a run stopped
    by a full disk still says how it ended). A report that cannot be written is a warning."""
    store, done = state.store, state.progress
    store.release_reserve()
    if done.pace is not None:      # what the run took, its profiled passes included
        done.pace.record_spending()
    manifest_mod.add_ending(done.manifest, done.interrupted is not None,
                            done.stopped.reason if done.stopped is not None else done.halted)
    try:
        store.write_manifest(done.manifest)
        # The run as its folder holds it, analysed once: its reports now, its history later.
        done.analysed = analyse_run(store)
        done.report = write_reports(store, done.analysed)
        done.summaries = done.report.summaries
    except (OSError, UsageError) as exc:     # UsageError: the manifest it wrote read back wrong
        why = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
        state.console.print(f"[yellow]! reports not written: {user_text(why)}[/]",
                            soft_wrap=True)


# --- how the run ended ----------------------------------------------------------------------------

def refuse_to_go_on_halted(state: RunState) -> None:
    if state.progress.halted:
        raise UsageError(f"run stopped: {state.progress.halted}; finished cells are kept — "
                         f"continue with: {resume_line(state)}")


def show_results(state: RunState) -> None:
    root = state.store.root
    report = state.progress.report or build_report(state.progress.manifest, [])
    try:
        show.show_results(report, f"{state.matrix.spec.run.name} ({root})", root,
                          state.console)
    except KeyboardInterrupt as exc:    # the tables cut short; the run still says its history
        state.progress.interrupted = exc


def stop_if_lost(state: RunState) -> int | None:
    """An executor lost: how many runs are not done, and the command that does them."""
    stopped = state.progress.stopped
    if stopped is None:
        return None
    finished = state.store.finished()
    left = len(state.plan.to_run) - sum(1 for e in state.plan.to_run if e.key in finished)
    state.console.print(f"[red]stopped:[/] {user_text(stopped.reason)}; {left} runs not "
                        f"done; continue with: {user_text(resume_line(state))}",
                        soft_wrap=True, highlight=False)
    say_not_recorded(state)
    interrupted = state.progress.interrupted
    return EXIT_FAILED_CELLS if interrupted is None else interrupted_exit_code(interrupted)


def resume_line(state: RunState) -> str:
    return resume.resume_command(state.opts, state.setup.executor.name, state.store.root)


def exit_code(state: RunState) -> int:
    done = state.progress
    if done.interrupted is not None:
        return interrupted_exit_code(done.interrupted)
    failed = [s for s in done.summaries if s["status"] not in ("ok", "not_applicable")]
    return EXIT_FAILED_CELLS if failed else EXIT_OK


# A matrix's cells, its matrix and setup made by the caller (reproduce, doctor --measure, bisect).
CELLS: tuple[Step, ...] = (
    price_the_run, open_resumed_store, plan_cells, refuse_an_empty_selection, plan_calibrations,
    resolve_stacks, choose_sources, show_setup, estimate_the_run, stop_at_the_plan, open_store,
    start_run, start_the_meter, measure, refuse_to_go_on_halted, show_results, stop_if_lost,
    write_history, exit_code)
RUN: tuple[Step, ...] = (load_matrix, lock_clocks, *CELLS)     # `run` and `plan`
