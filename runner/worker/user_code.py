"""A user workload's code in the worker: found in its staged, read-only copy, checked against the
digest the host took, and imported. Standard library only (the host hashes with `digest` too).

The executor says where the staged copies are in DL_BENCH_WORKLOADS: the run folder's
workloads/ for a local worker, its read-only mount in a container, the copy a Ray node received
with the cell. The copy's folder is appended to the import path (after the installed packages:
a helper module of the user's can never shadow a framework), and the workload file is imported
under its own name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from .protocol import UserWorkloadEntry

STAGED_ENV = "DL_BENCH_WORKLOADS"


def digest(entry: str, sources: dict[str, bytes]) -> str:
    """sha256 of the entry file's name and every (name, content) of its folder, in name order."""
    h = hashlib.sha256(entry.encode())
    for name in sorted(sources):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(sources[name]).digest())
    return h.hexdigest()


def staged_folder(entry: UserWorkloadEntry) -> Path:
    root = os.environ.get(STAGED_ENV)
    if not root:
        raise RuntimeError(f"user workload {entry['name']}: the executor gave no {STAGED_ENV} "
                           "(where its staged code is)")
    return Path(root) / entry["folder"]


def load(entry: UserWorkloadEntry) -> ModuleType:
    """The user's module of a cell spec's user_workload entry; RuntimeError when its staged copy
    is missing or is not the code the host hashed."""
    folder = staged_folder(entry)
    try:
        sources = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix == ".py"}
    except OSError as exc:
        raise RuntimeError(f"user workload {entry['name']}: its staged copy {folder} cannot be "
                           f"read: {exc}") from None
    entry_file = f"{entry['module']}.py"
    if digest(entry_file, sources) != entry["sha256"]:
        raise RuntimeError(f"user workload {entry['name']}: the staged copy in {folder} is not "
                           f"the code the host hashed ({entry['sha256'][:12]}…)")
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    spec = importlib.util.spec_from_file_location(entry["module"], folder / entry_file)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"user workload {entry['name']}: cannot import {entry_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[entry["module"]] = module
    spec.loader.exec_module(module)
    return module
