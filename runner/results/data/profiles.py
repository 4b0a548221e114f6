"""A run's profiles, on disk: profiles/<cell id>/ holds what a cell's profiled pass captured —
trace.json.gz (the framework's Chrome trace: Perfetto, chrome://tracing; torch's also reads in
Holistic Trace Analysis), kernels.json (one table for every framework: per step busy time, idle
share and launches, one row per op with its category) and profile.json (the pass: its status,
the profiler, the profiled step time against the timed one). Never records of the cell: nothing
here enters statistics, effects, compare or history.

What a worker hands back is checked before it is written: a worker runs code the runner does
not control (a user's workload), so its table is reduced to known fields of known types and its
trace must be gzip data within the size asked for."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
from pathlib import Path
from typing import Any

from ...worker.profiling.categories import CATEGORIES, category
from ...worker.protocol import write_json_atomic
from .store import read_file

PROFILES = "profiles"
SCHEMA = 1
PROFILE_FILE, KERNELS_FILE, TRACE_FILE = "profile.json", "kernels.json", "trace.json.gz"
MAX_NAME = 300                      # an op's name in the table (a C++ kernel's can be pages)
OVERHEAD_WARNING = 1.2              # profiled ÷ unprofiled above this: the profiler slowed them


def profile_dir(root: Path, cell_id: str) -> Path:
    return Path(root) / PROFILES / cell_id


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def clean_kernels(raw: Any) -> dict[str, Any] | None:
    """A worker's kernels.json reduced to its schema's fields and types (None: not one)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        return None
    rows = []
    for row in raw["rows"]:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            continue
        # The category by this runner's rules (a profile of an older one is read alike).
        rows.append({"name": row["name"][:MAX_NAME], "short": str(row.get("short", ""))[:MAX_NAME],
                     "category": category(row["name"]), "device": str(row.get("device", ""))[:16],
                     **{k: finite_number(row.get(k)) for k in ("count_per_step", "us_per_step",
                                                               "pct")}})
    categories = raw["categories"] if isinstance(raw.get("categories"), dict) else {}
    if not raw.get("rows_dropped"):        # every row is here: the totals follow the rules too
        categories = {}
        for row in rows:
            categories[row["category"]] = categories.get(row["category"], 0.0) + \
                (row["us_per_step"] or 0.0)
    per_step = [{k: finite_number(s.get(k)) for k in ("step", "ms", "busy_us", "idle_pct", "launches")}
                for s in raw.get("per_step") or [] if isinstance(s, dict)]
    return {"schema": SCHEMA, "source": str(raw.get("source", ""))[:40],
            "device": str(raw.get("device", ""))[:16],
            "time_basis": str(raw.get("time_basis", ""))[:40],
            **{k: finite_number(raw.get(k)) for k in ("steps", "step_ms", "device_busy_us",
                                                "device_idle_pct", "launches_per_step",
                                                "rows_dropped", "threads_overlap")},
            "categories": {k: v for k, v in ((c, finite_number(categories.get(c))) for c in CATEGORIES)
                           if v},
            "per_step": per_step, "rows": rows}


def trace_bytes(encoded: Any, limit_mb: float) -> bytes | None:
    """The worker's gzipped trace (base64), when it is gzip data within `limit_mb` (the
    compressed size can only be smaller than the uncompressed limit the pass was given)."""
    if not isinstance(encoded, str):
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not data.startswith(b"\x1f\x8b") or len(data) > limit_mb * 2**20:
        return None
    return data


def write_profile(root: Path, cell_id: str, profile: dict[str, Any],
                  kernels: dict[str, Any] | None, trace: bytes | None) -> Path:
    """profiles/<cell>/: each file written atomically, profile.json last (it names the others),
    so a profile.json on disk always has its files beside it."""
    folder = profile_dir(root, cell_id)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (KERNELS_FILE, TRACE_FILE):
        (folder / stale).unlink(missing_ok=True)
    if trace is not None:
        partial = folder / f".{TRACE_FILE}.tmp"
        partial.write_bytes(trace)
        partial.replace(folder / TRACE_FILE)
    if kernels is not None:
        write_json_atomic(folder / KERNELS_FILE, kernels)
    files = {"trace": TRACE_FILE if trace is not None else None,
             "kernels": KERNELS_FILE if kernels is not None else None}
    write_json_atomic(folder / PROFILE_FILE, {**profile, "schema": SCHEMA, "files": files})
    return folder


def read_profiles(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every profile of a run with its kernels table (profile["kernels"]), and a line for each
    that could not be read."""
    found, problems = [], []
    base = Path(root) / PROFILES
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        path = folder / PROFILE_FILE
        if folder.is_symlink() or not path.is_file():
            continue
        try:
            profile = json.loads(read_file(path))
            kernels_path = folder / KERNELS_FILE
            kernels = clean_kernels(json.loads(read_file(kernels_path))) \
                if kernels_path.is_file() else None
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if not isinstance(profile, dict):
            problems.append(f"{path}: not a profile")
            continue
        found.append({**profile, "kernels": kernels, "folder": f"{PROFILES}/{folder.name}"})
    return found, problems


def has_profile(root: Path, cell_id: str) -> bool:
    """Whether the cell has a finished profile (a resumed run or `profile` does not redo it)."""
    path = profile_dir(root, cell_id) / PROFILE_FILE
    try:
        return json.loads(read_file(path)).get("status") == "ok"
    except (OSError, ValueError, AttributeError):
        return False


def read_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)
