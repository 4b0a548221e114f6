"""What `--resume` checks before it adds a measurement to a run folder: that the runner version
and the matrix are the ones the run was started with (repeats of `steps = 1` and `steps = 500`
must never pool into one cell), and that every record it finds can be used — one that cannot is
set aside and its cell measured again, so a damaged record never blocks a resume."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping


from ..errors import UsageError, user_text
from ..results.data.store import Store, read_file
from ..version import runner_version

if TYPE_CHECKING:
    from rich.console import Console

    from ..schema.matrix import Matrix

ABSENT = "(absent)"


def matrix_sha256(resolved: dict[str, Any]) -> str:
    """The digest of a resolved matrix (profile applied), whatever its key order."""
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Every leaf that differs, as "key.path: old → new"."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in dict.fromkeys([*old, *new]):
            path = f"{where}.{key}" if where else str(key)
            out += differences(old.get(key, ABSENT), new.get(key, ABSENT), path)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in differences(a, b, f"{where}[{i}]")]
    if old == new and type(old) is type(new):
        return []
    return [f"{where}: {_shown(old)} → {_shown(new)}"]


def _shown(value: Any) -> str:
    text = value if value == ABSENT else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:40] + "…"


def recorded_matrix(store: Store) -> dict[str, Any] | None:
    """The run's own copy of its matrix (matrix.toml), or None when it cannot be read."""
    try:
        return tomllib.loads(read_file(store.root / "matrix.toml").decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


# What a resume may change: how many repeats (more processes of the very same cells; each
# record says its repeat), and the budget that stopped it. Anything else would pool
# measurements of different settings (or price them differently).
ALLOWED_CHANGE = re.compile(r"^((run|benchmarks\[\d+\]|profiles\.[^.]+)\.repeats|cost\.budget): ")


def check_same_matrix(store: Store, manifest: Mapping[str, Any], resolved: dict[str, Any],
                      matrix_path: Path) -> list[str]:
    """UsageError, naming what differs, when the matrix given now is not the run's; the allowed
    changes (repeats) otherwise, each as "key: old → new"."""
    recorded = manifest.get("matrix_sha256")
    if recorded == matrix_sha256(resolved):
        return []
    old = recorded_matrix(store)
    diff = differences(old, resolved) if old is not None else []
    if old is not None and not [d for d in diff if not ALLOWED_CHANGE.match(d)]:
        return diff                 # the same cells (a run from before the digest: the same)
    refused = [d for d in diff if not ALLOWED_CHANGE.match(d)] or \
        ["its matrix.toml cannot be read" if old is None else "the digest differs"]
    shown = "; ".join(refused[:3]) + (f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
    raise UsageError(f"--resume {store.root}: {matrix_path} is not the matrix this run was "
                     f"started with ({shown}); resume with the same matrix (the run's own "
                     f"matrix.toml; only repeats may change), or start a new run")


def set_aside(store: Store, say: Callable[[str], None]) -> None:
    """Move every record that cannot be used out of cells/ (changed since the runner wrote it,
    among others), saying which and why. A run made before the ledger gets one first."""
    taken = store.adopt_unledgered()
    if taken:
        say(f"{store.ledger.path.name}: the run had none; its {taken} record(s) are taken as "
            "they are now")
    for records in (store, store.calibration()):    # the calibration's too: it is measured again
        for target, problem in records.set_aside_unreadable():
            say(f"set aside {target.name} ({problem}) to {target.parent}: its cell runs again")



def open_resumed(matrix: Matrix, resume: Path | bool, results_dir: Path,
                 console: Console) -> Store:
    """The run's own folder (`resume` True: the latest run of this matrix's name): locked, made
    by this runner version, its matrix the same as now, its unusable records set aside so that
    their cells run again."""
    root = resume if isinstance(resume, Path) else Store.latest(matrix.spec.run.name, results_dir)
    store = Store.open(root)
    try:
        check_resumable(store)
        for change in check_same_matrix(store, store.read_manifest(), matrix.resolved,
                                        matrix.path):
            console.print(f"resuming with {user_text(change)}", soft_wrap=True)
        set_aside(store, lambda line: console.print(f"[yellow]! {user_text(line)}[/]",
                                                    soft_wrap=True))
    except BaseException:
        store.close()
        raise
    return store


def check_resumable(store: Store, action: str = "--resume") -> None:
    """A run is resumed (or profiled: `action`) only by the runner version that made it: another
    version's cells have other ids and its numbers would not compare (one line, exit 2, nothing
    written)."""
    try:
        made_by = store.read_manifest().get("runner_version")
    except (OSError, ValueError, AttributeError):
        made_by = None
    if made_by != runner_version():
        raise UsageError(f"{action} {store.root}: made by runner version "
                         f"{made_by or '(unversioned, older)'}, this is {runner_version()}: its "
                         "numbers would not compare with this runner's; start a new run")


def this_python() -> str:
    """This interpreter as a command line names it: relative to here when it lies below."""
    python = os.path.relpath(sys.executable)
    return python if not python.startswith("..") else sys.executable


def history_import_command(run_dir: Path, url: str) -> str:
    """The command that records a run folder, as it is, in a history (its password hidden)."""
    from ..history.destination import shown

    return shlex.join([this_python(), "-m", "runner", "history", "import", str(run_dir),
                       "--db", shown(url)])


def resume_command(opts: Any, executor: str, run_dir: Path) -> str:
    """The command that continues a run where it stopped: the same selection and executor
    (`opts`: the run's pipeline.Options)."""
    args = [this_python(), "-m", "runner",
            str(opts.matrix_path), "--resume", str(run_dir), "--executor", executor]
    for pattern in opts.only:
        args += ["--only", pattern]
    for flag, value in (("--profile", opts.profile), ("--parallel", opts.parallel),
                        ("--ray-address", opts.ray_address),
                        ("--budget", getattr(opts, "budget", None)),
                        ("--max-hours", getattr(opts, "max_hours", None))):
        if value is not None:
            args += [flag, str(value)]
    return shlex.join(args)
