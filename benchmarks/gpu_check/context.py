"""What every part of the GPU check shares: the check's context (its folders, the machine's
interpreter and the environment over it, the budget and the clock, the runner's plans, the run
folders the parts leave) and a part's outcome. Standard library only (check.py's reason)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SETUP_S = 20.0                          # the environment, the wheels, the plans
PACK_S = 10.0                           # the archive and the summary


@dataclasses.dataclass
class Context:
    out: Path
    work: Path
    python: str                 # the machine's interpreter
    wheels: Path
    wheel_list: Path
    profile: str
    dry_run: bool
    budget_s: float
    parts: tuple[str, ...] = ()     # --parts: these alone (a rerun); () all
    started: float = dataclasses.field(default_factory=time.monotonic)
    venv_python: Path | None = None
    log: Any = None             # OUT/check.log, open for appending
    # `python -m runner plan --json` of each (matrix, --only patterns) a part runs or sizes
    plans: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = dataclasses.field(
        default_factory=dict)
    runs: dict[str, Path] = dataclasses.field(default_factory=dict)   # part -> run folder
    kept: set[str] = dataclasses.field(default_factory=set)   # parts the budget holds, by name

    @property
    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def matrix(self, name: str) -> Path:
        """matrices/<name>.toml as the check runs it (its interpreter the environment's)."""
        return self.work / "matrices" / f"{name}.toml"


@dataclasses.dataclass
class Outcome:
    name: str
    status: str                     # ok | failed | skipped | dropped | planned
    estimate_s: float
    elapsed_s: float | None = None
    detail: str = ""
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
