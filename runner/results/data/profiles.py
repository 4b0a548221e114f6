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

from ...paths import folder_in_run
from ...worker.profiling.categories import CATEGORIES, category
from ...worker.protocol import atomic_target, json_text
from . import schemas
from .ledger import Ledger
from .store import describe_os_error, read_file
from .types import MAX_FIGURE

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
                  kernels: dict[str, Any] | None, trace: bytes | None,
                  ledger: Ledger | None = None) -> Path:
    """profiles/<cell>/: each file written atomically, profile.json last (it names the others),
    so a profile.json on disk always has its files beside it; each noted in the run's `ledger`
    before it is written (a profile made again retires the last one's lines)."""
    folder = folder_in_run(root, PROFILES, cell_id)     # never through a link: refused
    files = {"trace": TRACE_FILE if trace is not None else None,
             "kernels": KERNELS_FILE if kernels is not None else None}
    written = {TRACE_FILE: trace,
               KERNELS_FILE: None if kernels is None else json_text(kernels).encode(),
               PROFILE_FILE: json_text({**profile, "schema": SCHEMA, "files": files}).encode()}
    for name, data in written.items():
        noted, again = f"{PROFILES}/{cell_id}/{name}", "made again by a new profiled pass"
        if data is None:
            (folder / name).unlink(missing_ok=True)
            if ledger is not None:
                ledger.retire(noted, again)
            continue
        if ledger is not None:
            ledger.note(noted, data, replacing=again)
        write_bytes_atomic(folder / name, data)
    return folder


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_target(path) as partial, open(partial, "wb") as handle:
        handle.write(data)


def read_profiles(root: Path, ledger: Ledger | None = None
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every profile of a run with its kernels table (profile["kernels"]), and a line for each
    that could not be used: unreadable, not a valid profile (schemas.ProfileModel), a figure
    of its table not finite or beyond any measurement, or not what the runner wrote (its
    `ledger`, where given). A bad one is named and left out, as a record is."""
    found, problems = [], []
    base = Path(root) / PROFILES
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        path = folder / PROFILE_FILE
        if folder.is_symlink() or not path.is_file():
            continue
        profile, problem = read_profile(folder, ledger)
        if profile is None:
            problems.append(f"{path}: {problem}")
        else:
            found.append(profile)
    return found, problems


def read_profile(folder: Path, ledger: Ledger | None) -> tuple[dict[str, Any] | None, str | None]:
    """(profile with its kernels, None), or (None, why it cannot be used)."""
    try:
        raw = read_file(folder / PROFILE_FILE)
        kernels_path = folder / KERNELS_FILE
        kernels_raw = read_file(kernels_path) if kernels_path.is_file() else None
    except OSError as exc:
        return None, describe_os_error(exc)
    changed = ledger is not None and next(filter(None, (
        ledger.problem(f"{PROFILES}/{folder.name}/{name}", data)
        for name, data in ((PROFILE_FILE, raw), (KERNELS_FILE, kernels_raw))
        if data is not None)), None)
    if changed:
        return None, changed
    try:
        profile = schemas.parse_json(raw)
        kernels = schemas.parse_json(kernels_raw) if kernels_raw is not None else None
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    problem = schemas.profile_problem(profile) or (
        None if kernels is None else figures_problem(kernels))
    if problem:
        return None, problem
    return {**profile, "kernels": clean_kernels(kernels) if kernels is not None else None,
            "folder": f"{PROFILES}/{folder.name}"}, None


# The figures of a kernels table, where they are: each a number from 0 to MAX_FIGURE.
TABLE_FIGURES = ("steps", "step_ms", "device_busy_us", "device_idle_pct", "launches_per_step",
                 "rows_dropped")
STEP_FIGURES = ("step", "ms", "busy_us", "idle_pct", "launches")
ROW_FIGURES = ("count_per_step", "us_per_step", "pct")


def figures_problem(raw: Any) -> str | None:
    """kernels.json: the first figure that is not finite, negative or beyond any measurement
    (None: every one is a figure, or absent)."""
    if not isinstance(raw, dict):
        return f"{KERNELS_FILE}: expected a JSON object, got {type(raw).__name__}"
    places: list[tuple[str, Any, tuple[str, ...]]] = [("", raw, TABLE_FIGURES),
                                                       ("categories.", raw.get("categories"),
                                                        CATEGORIES)]
    lists: tuple[tuple[str, tuple[str, ...]], ...] = (("per_step", STEP_FIGURES),
                                                      ("rows", ROW_FIGURES))
    for name, figures in lists:
        items = raw.get(name)
        places += [(f"{name}[{i}].", item, figures)
                   for i, item in enumerate(items if isinstance(items, list) else [])]
    for where, table, figures in places:
        for key in figures if isinstance(table, dict) else ():
            value = table.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                    not 0 <= value <= MAX_FIGURE:       # NaN too: it compares false
                return f"{KERNELS_FILE}: {where}{key}: {value!r:.40} is not a figure from 0 " \
                       f"to {MAX_FIGURE:g}"
    return None


def has_profile(root: Path, cell_id: str, ledger: Ledger | None = None) -> bool:
    """Whether the cell has a finished profile (a resumed run or `profile` does not redo it),
    valid and as the runner wrote it (its `ledger`, where given): a bad one is made again."""
    profile, _ = read_profile(profile_dir(root, cell_id), ledger)
    return profile is not None and profile["status"] == "ok"


def read_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)
