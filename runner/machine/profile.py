"""Machine profiles: what `runner doctor --measure` found on one machine, kept as
results/machine-profiles/<host>-<gpu>.json (<gpu>: the model of GPU 0, or "cpu"):

- the harness's overhead per environment (the worker's clock against a bare loop);
- this machine's run-to-run spread per workload class, from an A/A run (the same cells run as
  several separate runs), and the `compare` threshold it supports; the step-to-step CV those
  runs saw per class (what a cell's CV warning is judged against);
- the GPU's state (persistence, ECC, clocks, power limit, idle temperature and power, other
  compute processes).

A run looks up the profile of the machine it runs on, by host name and GPU model, and copies its
figures into its manifest (`machine_profile`), so the run carries them wherever it is copied;
`compare` takes its threshold from there when both runs have one, and the report warns when a
run's machine has none.
"""

from __future__ import annotations

import json
import math
import re
import socket
from pathlib import Path
from typing import Any

PROFILES_DIR = "machine-profiles"
SCHEMA = 1
MIN_THRESHOLD = 0.01          # no threshold below 1 %: a timing is not that repeatable anywhere
THRESHOLD_STEP = 0.005        # thresholds are rounded up to the next 0.5 %
MEASURE_HINT = "python -m runner doctor --measure MATRIX"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "unknown"


def profile_key(host: str, gpu_name: str | None) -> str:
    return f"{slug(host)}-{slug(gpu_name) if gpu_name else 'cpu'}"


def this_machine() -> tuple[str, str | None]:
    """(host name, model of GPU 0 or None): what a profile is keyed by."""
    from . import hostinfo

    return socket.gethostname(), hostinfo.gpu_facts().get("gpu_name")


def path_for(results_dir: Path, host: str, gpu_name: str | None) -> Path:
    return results_dir / PROFILES_DIR / f"{profile_key(host, gpu_name)}.json"


def load(path: Path) -> dict[str, Any] | None:
    """A profile, or None when there is none (or it is not one: a bad file is never used)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def supported_threshold(spread: float) -> float:
    """The compare threshold an A/A spread supports: the largest change seen between two runs
    of the same cells, rounded up to the next 0.5 %, at least 1 %."""
    steps = math.ceil(round(spread / THRESHOLD_STEP, 6))
    return max(MIN_THRESHOLD, steps * THRESHOLD_STEP)


def manifest_entry(results_dir: Path, executor: Any) -> dict[str, Any]:
    """What a run's manifest keeps of its machine's profile: the threshold and spreads when
    there is one, where it would be when there is none (and none for an executor whose cells
    ran elsewhere)."""
    if not executor.on_this_host:
        return {"found": False, "why": f"{executor.name}: the cells ran on the cluster's nodes"}
    host, gpu = this_machine()
    path = path_for(results_dir, host, gpu)
    profile = load(path)
    entry: dict[str, Any] = {"found": profile is not None, "key": profile_key(host, gpu),
                             "host": host, "gpu_name": gpu, "path": str(path)}
    if profile is None:
        entry["why"] = f"no machine profile for host {host} ({gpu or 'no GPU'})"
        return entry
    aa = profile.get("aa") or {}
    entry.update(measured_at=profile.get("measured_at"), threshold=aa.get("threshold"),
                 spread=aa.get("spread"), cv=aa.get("cv"),
                 classes={name: {"spread": c.get("spread"), "threshold": c.get("threshold"),
                                 "cv": c.get("cv")}
                          for name, c in (aa.get("classes") or {}).items()},
                 clocks_locked=profile.get("clocks_locked"))
    return entry


def _class_value(entry: dict[str, Any] | None, workload: str | None, key: str) -> float | None:
    if not entry or not entry.get("found"):
        return None
    by_class = (entry.get("classes") or {}).get(workload or "") or {}
    value = by_class.get(key)
    return value if isinstance(value, (int, float)) else entry.get(key)


def spread_for(entry: dict[str, Any] | None, workload: str | None) -> float | None:
    """The machine's run-to-run spread for this workload class (its class's, else the
    machine's largest), or None without a profile."""
    return _class_value(entry, workload, "spread")


def cv_for(entry: dict[str, Any] | None, workload: str | None) -> float | None:
    """The step-to-step CV this machine's A/A runs saw for this workload class (the typical
    repeat's, in their worst cell and run; else the machine's largest), or None without a
    profile (or one measured before it was kept)."""
    return _class_value(entry, workload, "cv")


def threshold_for(entry: dict[str, Any] | None, workload: str | None) -> float | None:
    return _class_value(entry, workload, "threshold")


def compare_threshold(entry_a: dict[str, Any] | None, entry_b: dict[str, Any] | None,
                      workload: str | None, default: float) -> tuple[float, bool]:
    """(threshold, from the profiles): the larger of the two machines' thresholds for this
    workload class when both runs ran on profiled machines, else `default`."""
    both = [threshold_for(e, workload) for e in (entry_a, entry_b)]
    found = [t for t in both if t is not None]
    if len(found) < len(both):
        return default, False
    return max(found), True
