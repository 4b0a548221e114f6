"""Each step of the pipeline (runner/run/pipeline.py) on its own, against a fake executor: a small
Executor of base.py's contract that "prepares" an environment by saying so and "runs" an attempt
by writing the worker's result.json itself, as a worker would, with no framework and no process.
What is tested is the steps' logic: what each decides (a new frozen Decisions), what each does to
the run's progress and folder, and how a run ends (interrupted, an executor lost, a full disk).
The executors and the worker are tested for real elsewhere (tests/executors/, tests/worker/)."""

from __future__ import annotations

import dataclasses
import errno
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from runner.environments import Flavour, Source
from runner.errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError
from runner.executors.base import Attempt, Executor, Outcome, Prepared
from runner.machine import hostinfo
from runner.results.data.store import Store
from runner.run import pipeline
from runner.run.setup import Setup
from runner.run.state import Decisions, Options, RunState
from runner.schema import matrix as matrix_mod
from runner.worker.protocol import empty_result, write_json_atomic
from tests.matrices import matrix_text

# Two runnable cells (matmul on numpy and on keras-jax) × 2 repeats, and two not applicable
# (steps_per_execution = 4 on both).
def steps_matrix(**run_settings: Any) -> str:
    return matrix_text("steps", repeats=2, steps=3, settle=0, **run_settings,
                       environments=["numpy", "keras-jax"],
                       benchmarks=[{"workload": "matmul", "environments": ["*"], "size": "tiny",
                                    "steps_per_execution": [1, 4]}])


MATRIX = steps_matrix()
SAMPLES = [2.0, 2.1, 1.9]


class FakeExecutor(Executor):
    """Base.py's contract with nothing behind it. `behave(attempt)` decides what a run does:
    None writes an ok result; a string writes a failed one with that error; an exception is
    raised from run() (Ctrl-C, a full disk); `lose_after` marks the executor lost after that
    many attempts (its engine gone)."""

    name = "fake"
    runs_existing = True

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False) -> None:
        self.flavour = flavour or Flavour("cpu", "the fake's")
        self.prepared: list[str] = []
        self.attempts: list[str] = []
        self.closed = 0
        self.fail_prepare: set[str] = set()
        self.behave: Callable[[Attempt], str | BaseException | None] = lambda attempt: None
        self.lose_after: int | None = None

    def would_use(self, source: Source) -> tuple[str | None, str]:
        return "cpu", f"fake:{source.key}"

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        self.prepared.append(source.key)
        on_line("pretending")
        error = "no such stack" if source.key in self.fail_prepare else None
        return Prepared(key=source.key, uses=f"fake:{source.key}", flavour="cpu",
                        metadata={"lock_sha256": f"fake-{source.key}"}, error=error)

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        self.attempts.append(attempt.key)
        what = self.behave(attempt)
        if isinstance(what, BaseException):
            raise what
        assert attempt.spec_path.is_file()          # the host wrote spec.json for the worker
        result = empty_result(attempt.spec)
        if what is None:
            result.update(status="ok", samples_ms=list(SAMPLES), train_s=2.0)
        else:
            result.update(status="failed", error=what)
        write_json_atomic(attempt.result_path, result)
        attempt.log_path.write_text("the fake worker\n", encoding="utf-8")
        if self.lose_after is not None and len(self.attempts) >= self.lose_after:
            self.lost = "the fake engine went away"
        return Outcome(returncode=0, timed_out=False, wall_s=0.01)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """This host has no GPU, wherever the tests run: one CPU lane, no clocks, no settling."""
    monkeypatch.setattr(hostinfo, "gpus", lambda: [])
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: {})


@pytest.fixture
def fake() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def make_state(write_matrix, results_dir, fake):
    """make_state(text=MATRIX, **options) -> a RunState whose matrix is loaded and whose setup
    runs every cell on the fake executor; its console writes to state.console.file."""

    def make(text: str = MATRIX, **options: Any) -> RunState:
        path = write_matrix(text, with_environments=False)
        opts = Options(matrix_path=path, results_dir=results_dir, history=False, **options)
        matrix = matrix_mod.load(path, opts.profile)
        setup = Setup(fake, "a fake executor for the test")
        return RunState(opts, Console(file=io.StringIO(), width=200), Decisions(matrix, setup))

    return make


def output(state: RunState) -> str:
    return state.console.file.getvalue()        # type: ignore[attr-defined]


def planned(state: RunState, *steps: pipeline.Step) -> RunState:
    for step in (pipeline.plan_cells, pipeline.plan_calibrations, pipeline.choose_sources,
                 *steps):
        assert step(state) is None
    return state


def started(state: RunState) -> RunState:
    return planned(state, pipeline.open_store, pipeline.start_run)


def records(state: RunState) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((state.store.root / "cells").glob("*.json"))}


# --- the state's two halves ---------------------------------------------------------------------

def test_a_part_read_before_its_step_names_the_step(make_state):
    state = make_state()
    with pytest.raises(RuntimeError, match="the plan before its step plan_cells ran"):
        _ = state.plan
    with pytest.raises(RuntimeError, match="the run folder before its step open_store ran"):
        _ = state.store
    bare = RunState(state.opts, state.console)
    with pytest.raises(RuntimeError, match="the matrix and setup before its step load_matrix"):
        _ = bare.matrix


def test_a_step_that_decides_replaces_the_frozen_decisions(make_state):
    state = make_state()
    before = state.decisions
    pipeline.plan_cells(state)
    assert state.decisions is not before and before.plan is None     # the old one unchanged
    assert state.decisions.matrix is before.matrix and state.decisions.setup is before.setup
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.decisions.plan = None                                  # type: ignore[misc]


# --- before anything is written -----------------------------------------------------------------

def test_load_matrix_decides_the_matrix_and_a_setup_closed_with_the_run(write_matrix,
                                                                       results_dir):
    path = write_matrix(steps_matrix(profile="auto"), with_environments=False)
    state = RunState(Options(matrix_path=path, results_dir=results_dir, executor="local"),
                     Console(file=io.StringIO(), width=200))
    closed: list[str] = []
    with state.cleanup:
        assert pipeline.load_matrix(state) is None
        assert state.matrix.path == path and state.matrix.profile == "smoke"  # no GPU: smoke
        assert state.setup.executor.name == "local" and state.decisions.plan is None
        state.setup.executor.close = lambda: closed.append("closed")  # type: ignore[method-assign]
        assert closed == []
    assert closed == ["closed"]                   # however the run ends, by the cleanup
    assert output(state).startswith("profile: smoke (auto: no GPU found")


def test_plan_cells_plans_every_repeat_and_the_not_applicable_cells(make_state):
    state = planned(make_state())
    plan = state.plan
    assert [(e.cell.environment, e.repeat) for e in plan.to_run] == [
        ("numpy", 1), ("keras-jax", 1), ("numpy", 2), ("keras-jax", 2)]
    assert len(plan.not_applicable) == 2 and not plan.done


def test_only_narrows_the_plan_and_one_that_matches_nothing_is_refused(make_state):
    state = planned(make_state(only=["numpy"]))
    assert {e.cell.environment for e in state.plan.to_run} == {"numpy"}
    assert pipeline.refuse_an_empty_selection(state) is None
    empty = planned(make_state(only=["no-such-cell"]))
    with pytest.raises(UsageError, match="--only no-such-cell: no cell of .* matches"):
        pipeline.refuse_an_empty_selection(empty)


def test_a_resumed_plan_skips_what_the_run_folder_finished(make_state, fake):
    first = started(make_state())
    pipeline.prepare_environments(first)
    pipeline.run_planned_cells(first)
    done_key = first.plan.to_run[0].key
    first.store.close()
    for path in (first.store.root / "cells").glob("*.json"):
        if path.stem != done_key and "spe=4" not in json.loads(path.read_text())["cell_name"]:
            path.unlink()                                 # only one repeat finished
    again = make_state(resume=first.store.root)
    with again.cleanup:
        assert pipeline.open_resumed_store(again) is None
        assert again.store.root == first.store.root
        planned(again)
    assert [e.key for e in again.plan.done] == [done_key]
    assert done_key not in {e.key for e in again.plan.to_run} and len(again.plan.to_run) == 3


def test_calibrations_are_planned_only_for_environments_the_plan_uses(make_state):
    text = steps_matrix(calibrate=True)
    every = planned(make_state(text))
    assert {c.environment for c in every.calibrations} == {"numpy", "keras-jax"}
    narrowed = planned(make_state(text, only=["numpy"]))
    assert narrowed.calibrations and {c.environment for c in narrowed.calibrations} == {"numpy"}


def test_sources_are_chosen_once_for_the_cells_to_run(make_state):
    state = planned(make_state())
    assert [s.key for s in state.sources] == ["numpy", "jax"]       # two image folders
    assert isinstance(state.sources, tuple)
    state = planned(make_state(only=["keras-jax"]))
    assert [s.key for s in state.sources] == ["jax"]


def test_the_dry_run_stops_at_the_plan_and_a_run_goes_on(make_state):
    dry = planned(make_state(dry_run=True))
    assert pipeline.stop_at_the_plan(dry) == EXIT_OK
    assert "matmul-run-numpy-b1-size=tiny" in output(dry) and dry.progress.store is None
    assert pipeline.stop_at_the_plan(planned(make_state())) is None


def test_show_setup_names_the_executor_and_its_reason(make_state):
    state = planned(make_state(), pipeline.show_setup)
    assert "a fake executor for the test" in output(state)


# --- the run folder -----------------------------------------------------------------------------

def test_open_store_makes_a_new_run_folder_and_keeps_a_resumed_one(make_state, results_dir):
    state = planned(make_state(), pipeline.open_store)
    assert state.store.root.parent == results_dir / "steps"
    opened = state.store
    pipeline.open_store(state)
    assert state.store is opened


def test_start_run_writes_the_matrix_the_manifest_and_the_not_applicable_records(make_state):
    state = started(make_state())
    root = state.store.root
    assert (root / "matrix.toml").is_file()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    assert manifest == state.progress.manifest
    assert manifest["executor"] == "fake"
    assert manifest["environments"]["numpy"]["uses"] == "fake:numpy"
    assert sorted(r["status"] for r in records(state).values()) == ["not_applicable"] * 2
    assert f"run folder: {root}" in output(state)


# --- measuring ----------------------------------------------------------------------------------

def test_prepare_environments_prepares_each_source_once(make_state, fake):
    state = planned(started(make_state()), pipeline.prepare_environments)
    assert fake.prepared == ["numpy", "jax"]
    assert set(state.progress.prepared) == {"numpy", "jax"}
    assert "environments ready: numpy" in output(state)


def test_cells_run_on_the_executor_and_their_records_are_stored(make_state, fake):
    state = planned(started(make_state()), pipeline.prepare_environments,
                    pipeline.run_planned_cells)
    assert fake.attempts == [e.key for e in state.plan.to_run]
    stored = records(state)
    ok = {key: r for key, r in stored.items() if r["status"] == "ok"}
    assert set(ok) == {e.key for e in state.plan.to_run}
    for record in ok.values():                    # the host's own figures added on storing
        assert record["samples_ms"] == SAMPLES and record["median_ms"] == 2.0
        assert record["metadata"]["lock_sha256"] in ("fake-numpy", "fake-jax")


def test_an_environment_that_could_not_be_prepared_fails_its_cells_only(make_state, fake):
    fake.fail_prepare = {"jax"}
    state = planned(started(make_state()), pipeline.prepare_environments,
                    pipeline.run_planned_cells)
    measured = [r for r in records(state).values() if r["status"] != "not_applicable"]
    assert {(r["environment"], r["status"], r["error"]) for r in measured} == {
        ("numpy", "ok", None), ("keras-jax", "failed", "no such stack")}
    assert all(a.startswith(state.plan.to_run[0].cell.id) for a in fake.attempts)  # numpy only


def test_measure_writes_the_manifest_and_reports_and_the_exit_code_follows(make_state, fake):
    fake.behave = lambda attempt: "diverged" if "keras-jax" in attempt.spec.cell_name else None
    state = started(make_state())
    assert pipeline.measure(state) is None
    root = state.store.root
    assert (root / "report.md").is_file() and (root / "summary.csv").is_file()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["interrupted"] is False and "stopped" not in manifest
    assert fake.closed == 1                                  # the executors closed first
    statuses = {s["environment"]: s["status"] for s in state.progress.summaries
                if s["status"] != "not_applicable"}
    assert statuses == {"numpy": "ok", "keras-jax": "failed"}
    assert pipeline.exit_code(state) == EXIT_FAILED_CELLS


def test_a_run_whose_cells_all_pass_exits_0(make_state):
    state = started(make_state())
    pipeline.measure(state)
    assert pipeline.stop_if_lost(state) is None and pipeline.exit_code(state) == EXIT_OK


def test_ctrl_c_keeps_finished_cells_finalises_the_manifest_and_exits_130(make_state, fake):
    fake.behave = lambda attempt: KeyboardInterrupt() if len(fake.attempts) == 3 else None
    state = started(make_state())
    pipeline.measure(state)
    assert isinstance(state.progress.interrupted, KeyboardInterrupt)
    ok = [r for r in records(state).values() if r["status"] == "ok"]
    assert len(ok) == 2                                        # the first two attempts
    manifest = json.loads((state.store.root / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["interrupted"] is True
    assert "interrupted: finished cells are kept; continue with:" in output(state)
    assert f"--resume {state.store.root}" in output(state)
    assert pipeline.exit_code(state) == 130


def test_a_lost_executor_stops_the_run_and_says_how_to_go_on(make_state, fake):
    fake.lose_after = 1
    state = started(make_state())
    pipeline.measure(state)
    assert state.progress.stopped is not None
    assert state.progress.stopped.reason == "the fake engine went away"
    assert fake.attempts == [state.plan.to_run[0].key]         # none started after it
    assert pipeline.stop_if_lost(state) == EXIT_FAILED_CELLS
    assert "3 runs not done; continue with:" in output(state)
    manifest = json.loads((state.store.root / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stopped"] == "the fake engine went away"


def test_a_full_disk_halts_the_run_with_its_reason(make_state, fake):
    fake.behave = lambda attempt: OSError(errno.ENOSPC, "No space left on device") \
        if len(fake.attempts) == 2 else None
    state = started(make_state())
    pipeline.measure(state)
    assert state.progress.halted is not None and "No space left" in state.progress.halted
    assert (state.store.root / "report.md").is_file()           # the reports still written
    with pytest.raises(UsageError, match="run stopped: .*No space left.* continue with: "):
        pipeline.refuse_to_go_on_halted(state)


def test_no_history_is_written_when_the_options_say_none_or_the_run_was_interrupted(
        make_state, results_dir):
    state = started(make_state())
    pipeline.measure(state)
    pipeline.write_history(state)                              # history=False
    state.opts.history = True
    state.progress.interrupted = KeyboardInterrupt()
    pipeline.write_history(state)
    assert not (results_dir / "history.sqlite").exists()


# --- a run as a tuple of steps ------------------------------------------------------------------

def test_execute_stops_at_the_first_exit_code_and_gives_back_what_the_steps_took(make_state):
    state = make_state()
    ran: list[str] = []

    def step(name: str, code: int | None = None) -> pipeline.Step:
        def run(state: RunState) -> int | None:
            ran.append(name)
            state.cleanup.callback(ran.append, f"cleaned {name}")
            return code
        return run

    assert pipeline.execute((step("a"), step("b", 3), step("c")), state) == 3
    assert ran == ["a", "b", "cleaned b", "cleaned a"]


def test_the_cells_steps_run_a_whole_run_on_the_fake(make_state, fake, results_dir):
    state = make_state()
    assert pipeline.execute(pipeline.CELLS, state) == EXIT_OK
    (run,) = (results_dir / "steps").iterdir()
    assert Store(run).finished() >= {e.key for e in state.plan.to_run}
    assert len(fake.attempts) == 4 and fake.closed == 1
    assert (run / "report.html").is_file()
