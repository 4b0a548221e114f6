"""What a run knows as its steps go (pipeline.py): the command line's options and the
state the steps fill in, each part read through a property that names the step that makes it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from rich.console import Console

from ..environments import Source
from ..executors.base import Prepared
from ..paths import RESULTS_DIR
from ..results.data.store import Store
from ..results.data.types import CellSummary, Manifest
from ..schema.matrix import Cell, Matrix
from .cells import RunStopped
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


@dataclass
class RunState:
    """What the steps know so far. `cleanup` gives back what they took (the setup's executors,
    locked clocks, the run folder's lock) however the run ends, last taken first."""

    opts: Options
    console: Console
    # Filled by the steps (load_matrix, open_store or resume_store, plan_cells) or given by a
    # caller that made them itself; read through the properties below, which say which step
    # should have run when one is read too early (a pipeline bug: an internal error).
    loaded_matrix: Matrix | None = None
    chosen_setup: Setup | None = None
    opened_store: Store | None = None
    made_plan: Plan | None = None
    calibrations: list[Cell] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    manifest: Manifest = field(default_factory=lambda: Manifest())
    summaries: list[CellSummary] = field(default_factory=list)
    interrupted: KeyboardInterrupt | None = None   # Ctrl-C, SIGTERM, SIGHUP: 130, 143, 129
    stopped: RunStopped | None = None              # an executor lost: exit 1
    halted: str | None = None                      # the disk or the folder said no: exit 2
    cleanup: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def matrix(self) -> Matrix:
        return _made(self.loaded_matrix, "the matrix", "load_matrix")

    @matrix.setter
    def matrix(self, value: Matrix) -> None:
        self.loaded_matrix = value

    @property
    def setup(self) -> Setup:
        return _made(self.chosen_setup, "the setup", "load_matrix")

    @setup.setter
    def setup(self, value: Setup) -> None:
        self.chosen_setup = value

    @property
    def store(self) -> Store:
        return _made(self.opened_store, "the run folder", "open_store")

    @store.setter
    def store(self, value: Store) -> None:
        self.opened_store = value

    @property
    def plan(self) -> Plan:
        return _made(self.made_plan, "the plan", "plan_cells")

    @plan.setter
    def plan(self, value: Plan) -> None:
        self.made_plan = value


T = TypeVar("T")


def _made(value: T | None, what: str, step: str) -> T:
    if value is None:
        raise RuntimeError(f"the pipeline read {what} before its step {step} ran")
    return value


Step = Callable[[RunState], "int | None"]
