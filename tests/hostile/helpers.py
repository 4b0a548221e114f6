"""What the hostile suites by subject share beside test_hostile_runs.py's matrix and CLI helpers:
a worker that lies, a run folder copied or tampered with, the runs a history holds, a memory
limit for a child process, and hypothesis's settings."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import sys
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, settings

from tests.hostile.test_hostile_runs import MATRIX

HOST_PYTHON = sys.executable

FUZZ = settings(max_examples=int(os.environ.get("HOSTILE_FUZZ_EXAMPLES", "25")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


def fake_interpreter(folder: Path, worker: str, name: str = "liar") -> Path:
    """An interpreter that runs `worker` (a script) in place of the runner's worker, and is the
    host's Python for anything else (the probe)."""
    script = folder / f"{name}_worker.py"
    script.write_text(textwrap.dedent(worker))
    interpreter = folder / name
    interpreter.write_text(f'#!/bin/sh\nif [ "$2" = "runner.worker" ]; then exec {HOST_PYTHON} '
                           f'{script} "$3" "$4"; fi\nexec {HOST_PYTHON} "$@"\n')
    interpreter.chmod(0o755)
    return interpreter


def copy_run(finished_run: Path, into: Path, run_id: str | None = None) -> Path:
    """A copy of the run under into/results/hostile/ (another run, when `run_id` names it),
    with its matrix beside."""
    target = into / "results" / "hostile" / (run_id or finished_run.name)
    shutil.copytree(finished_run, target, symlinks=True)
    (target / ".lock").unlink(missing_ok=True)
    (into / "matrix.toml").write_text(MATRIX)
    if run_id:
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["run_id"] = f"hostile/{run_id}"
        (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def tamper(run_dir: Path, change) -> list[Path]:
    """Apply change(record) to the records of one cell (both repeats); the files changed."""
    first_cell = sorted((run_dir / "cells").glob("*.json"))[0].stem.rsplit("-r", 1)[0]
    changed = sorted((run_dir / "cells").glob(f"{first_cell}-r*.json"))
    for path in changed:
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    return changed


def history_runs(database: Path) -> list[str]:
    """The run ids a SQLite history holds (none: no such file)."""
    if not database.exists():
        return []
    with sqlite3.connect(database) as connection:
        return sorted(row[0] for row in connection.execute("SELECT run_id FROM runs"))


def at_most_1_gb_of_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
