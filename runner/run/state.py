"""What a run knows as its steps go (pipeline.py): the command line's options, what the run
decided (Decisions: frozen, replaced whole by each step that decides more) and what it has done
so far (Progress: it grows as the run goes), each part read through a property that names the
step that makes it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from ..cost.estimate import Estimate
from ..cost.pricing import RunPrice
from ..environments import Source
from ..executors.base import Prepared
from ..paths import RESULTS_DIR
from ..results.analysis.report_model import ReportModel, RunAnalysis
from ..results.data.store import Store
from ..results.data.types import CellSummary, Manifest
from ..schema.matrix import Cell, Matrix
from .block_sizes import HandedBlocks
from .cells import RunStopped
from .pace import Pace
from .plan import Plan
from .setup import Setup


@dataclass
class Options:
    """What the command line asks of a run."""

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
    # --profile-cells: cells profiled after their timed repeats, besides [profiling] cells.
    profile_cells: list[str] = field(default_factory=list)
    budget: float | None = None           # --budget USD: overrides [cost] budget
    max_hours: float | None = None        # --max-hours: stop before a cell would pass it
    recalibrate: bool = False             # measure the peaks even where the cache has them
    # Every cell's block size, handed to every repeat instead of calibrated (bisect: the good
    # end's, so that each step times the same block and compares like with like).
    calls_per_sample: int | None = None
    # --tuning: the tuning folders the tuned tier's cells read their knobs from (none: the
    # matrix's newest that has the cell)
    tuning: list[Path] = field(default_factory=list)
    # --blocks-from RUN_A: each cell's block size from A's same cell (compare like with like).
    blocks_from: HandedBlocks | None = None


@dataclass(frozen=True)
class Decisions:
    """What the run decided, in the order its steps decide it: the matrix and the setup
    (load_matrix, or a caller that made them: reproduce, doctor --measure, bisect), the plan
    (plan_cells), the calibrations (plan_calibrations) and the sources to prepare
    (choose_sources). Frozen: a step that decides more gives the state a new one
    (RunState.decide), so no step changes what an earlier one decided."""

    matrix: Matrix
    setup: Setup
    plan: Plan | None = None
    calibrations: tuple[Cell, ...] = ()
    sources: tuple[Source, ...] = ()
    price: RunPrice | None = None         # [cost], priced (price_the_run)
    budget: float | None = None           # --budget, else [cost] budget
    estimate: Estimate | None = None      # the run's time before it runs (estimate_the_run)
    # per tuned cell's id: its knobs and where they came from (plan_cells, run/tiers.py)
    tuned: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Progress:
    """What the run has done so far: its folder (open_store or open_resumed_store), the
    environments prepared, the manifest as it grows, the summaries its reports were made from,
    and how it stopped, if it did."""

    store: Store | None = None
    prepared: dict[str, Prepared] = field(default_factory=dict)
    manifest: Manifest = field(default_factory=lambda: Manifest())
    summaries: list[CellSummary] = field(default_factory=list)
    analysed: RunAnalysis | None = None            # the run analysed once (analyse_run)
    report: ReportModel | None = None              # what the reports show (write_reports)
    interrupted: KeyboardInterrupt | None = None   # Ctrl-C, SIGTERM, SIGHUP: 130, 143, 129
    stopped: RunStopped | None = None              # an executor lost: exit 1
    halted: str | None = None                      # the disk or the folder said no: exit 2
    pace: Pace | None = None                       # [k/N], finish time, caps (start_the_meter)


@dataclass
class RunState:
    """What the steps know so far: the options, the decisions, the progress. `cleanup` gives back
    what the steps took (the setup's executors, locked clocks, the run folder's lock) however
    the run ends, last taken first. A part read before its step ran is a pipeline bug (an
    internal error naming the step)."""

    opts: Options
    console: Console
    decided: Decisions | None = None    # given by a caller that made the matrix and setup itself
    progress: Progress = field(default_factory=Progress)
    cleanup: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def decide(self, **decided: Any) -> None:
        """Record what a step decided: a new Decisions with these fields replaced."""
        self.decided = dataclasses.replace(self.decisions, **decided)

    @property
    def decisions(self) -> Decisions:
        return _made(self.decided, "the matrix and setup", "load_matrix")

    @property
    def matrix(self) -> Matrix:
        return self.decisions.matrix

    @property
    def setup(self) -> Setup:
        return self.decisions.setup

    @property
    def plan(self) -> Plan:
        return _made(self.decisions.plan, "the plan", "plan_cells")

    @property
    def calibrations(self) -> tuple[Cell, ...]:
        return self.decisions.calibrations

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.decisions.sources

    @property
    def store(self) -> Store:
        return _made(self.progress.store, "the run folder", "open_store")


T = TypeVar("T")


def _made(value: T | None, what: str, step: str) -> T:
    if value is None:
        raise RuntimeError(f"the pipeline read {what} before its step {step} ran")
    return value


Step = Callable[[RunState], "int | None"]
