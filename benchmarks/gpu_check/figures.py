"""The figures of a part, read from what the runner left: a run folder's summary.csv and records
(each cell's time, memory, quantization, tier; whether it computed on the GPU), its profiles
(kernels.json: the GPU kernels by category, idle share, launches; each profiled row's gap), the
Keras tax of its layer rows (each Keras cell ÷ the native cell of its engine), the defaults
against the tuned tier, and a tuning folder's tuned.toml and probes. Standard library only
(check.py's reason)."""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path
from typing import Any

CELL_COLUMNS = ("cell_id", "cell_name", "environment", "api", "backend", "workload", "task", "batch_size",
                "precision", "jit", "tier", "status", "repeats_ok", "geomean_ms",
                "achieved_tflops", "peak_tflops", "fraction_of_peak", "tf32_effective",
                "device_name", "ttft_ms", "tokens_per_s", "energy_per_step_j",
                "energy_per_step_above_idle_j", "gpu_idle_power_w", "compile_s", "wall_s",
                "vram_peak_mb", "nvml_memory_peak_mb", "rss_peak_mb", "answer_check",
                "quantization_check", "quantization_base", "model_bytes_before",
                "model_bytes_after", "quantization_top1_agreement",
                "quantization_relative_error", "emulated", "error")
# What the issue asks of a GPU profile: at most this share of its kernel time uncategorised.
MAX_OTHER_SHARE = 0.30
# The native API of each Keras backend (report.md's Keras tax pairs them the same way).
NATIVE_OF_BACKEND = {"jax": "jax", "torch": "torch", "tensorflow": "tensorflow"}


def number(value: Any) -> float | None:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return found if found == found else None


def row_key(row: dict[str, Any]) -> str:
    """A cell's row: its name without its environment (the cells of one row differ only there)."""
    return str(row["cell_name"]).replace(f"-{row['environment']}-", "-", 1)


def cell_rows(run_dir: Path, problems: list[str]) -> list[dict[str, Any]]:
    summary = run_dir / "summary.csv"
    if not summary.is_file():
        problems.append(f"no summary.csv in {run_dir.name}")
        return []
    with summary.open(encoding="utf-8", newline="") as handle:
        rows = [{k: row.get(k) for k in CELL_COLUMNS} for row in csv.DictReader(handle)]
    # A benchmark of the other profile is planned "not applicable": not this check's cell.
    return [row for row in rows if "profile only" not in (row["error"] or "")]


def run_figures(run_dir: Path, on_gpu: bool) -> dict[str, Any]:
    """From a finished run folder: each cell's summary row (summary.csv, written by the runner),
    what its records say of the device (ran on the GPU, clock events), its profiles, the Keras
    tax and the tiers where it has them, and the problems."""
    problems: list[str] = []
    rows = cell_rows(run_dir, problems)
    on_gpu_count, records, events = 0, 0, set()
    for path in sorted((run_dir / "cells").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            problems.append(f"{path.name}: not readable")
            continue
        if record.get("status") != "ok":
            continue
        records += 1
        device = str((record.get("effective") or {}).get("device") or "")
        if (record.get("metadata") or {}).get("gpu_name") and "cpu" not in device.lower():
            on_gpu_count += 1
        events.update(record.get("gpu_clock_events") or [])
    for row in rows:
        if row["status"] not in ("ok", "not_applicable"):
            error = (row["error"] or "").strip().splitlines()
            problems.append(f"{row['cell_name']}: {row['status']} {error[0][:200] if error else ''}")
    if on_gpu and on_gpu_count < records:
        problems.append(f"{records - on_gpu_count} of {records} records did not compute on the GPU")
    figures: dict[str, Any] = {"cells": rows, "records": records, "records_on_gpu": on_gpu_count,
                               "clock_events": sorted(events), "run": run_dir.name}
    if (run_dir / "profiles").is_dir():
        figures["profiles"] = profile_rows(run_dir, on_gpu, problems)
        figures["gaps"] = profile_gaps(rows, figures["profiles"], run_dir)
    taxes = keras_tax(rows)
    if taxes:
        figures["keras_tax"] = taxes
    tiers = tier_gains(rows)
    if tiers:
        figures["tiers"] = tiers
    figures["problems"] = problems
    return figures


# --- profiles ---------------------------------------------------------------------------------

def profile_rows(run_dir: Path, on_gpu: bool, problems: list[str]) -> list[dict[str, Any]]:
    """Each profiled pass: its status, profiler, device, step, overhead, idle share, launches,
    its categories' shares of the kernel time, its top op; on a GPU, a pass without GPU kernels
    or with more than MAX_OTHER_SHARE of them uncategorised is a problem."""
    rows = []
    for path in sorted((run_dir / "profiles").glob("*/profile.json")):
        profile = json.loads(path.read_text(encoding="utf-8"))
        kernels_path = path.with_name("kernels.json")
        kernels = json.loads(kernels_path.read_text(encoding="utf-8")) \
            if kernels_path.is_file() else {}
        categories = {k: v for k, v in (kernels.get("categories") or {}).items() if v}
        busy = sum(categories.values())
        shares = {k: v / busy for k, v in sorted(categories.items(), key=lambda kv: -kv[1])} \
            if busy else {}
        row = {"cell": profile.get("cell_name"), "cell_id": profile.get("cell_id"),
               "status": profile.get("status"), "device": kernels.get("device"),
               "source": kernels.get("source"), "profiled_ms": profile.get("profiled_step_ms"),
               "overhead": profile.get("profile_overhead"),
               "idle_pct": kernels.get("device_idle_pct"),
               "launches": kernels.get("launches_per_step"), "shares": shares,
               "top": ((kernels.get("rows") or [{}])[0]).get("name", "")[:60]}
        rows.append(row)
        if profile.get("status") != "ok":
            problems.append(f"{row['cell']}: profile {profile.get('error')}"[:200])
        elif on_gpu and kernels.get("device") != "gpu":
            problems.append(f"{row['cell']}: no GPU kernel in its profile")
        elif on_gpu and shares.get("other", 0.0) > MAX_OTHER_SHARE:
            problems.append(f"{row['cell']}: {shares['other']:.0%} of its kernel time is "
                            f"'other' (at most {MAX_OTHER_SHARE:.0%})")
    return rows


def profile_gaps(rows: list[dict[str, Any]], profiles: list[dict[str, Any]],
                 run_dir: Path) -> list[dict[str, Any]]:
    """Per profiled row of two cells or more: the slowest ÷ the fastest (their ms/step, one
    repeat each: no interval), and their profiles' launches and idle shares side by side; and
    report.md's own sentence on the row where it wrote one (three repeats a side)."""
    by_name = {p["cell"]: p for p in profiles if p["status"] == "ok"}
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["cell_name"] in by_name and number(row["geomean_ms"]):
            groups.setdefault(row_key(row), []).append(row)
    gaps = []
    for key, cells in groups.items():
        if len(cells) < 2:
            continue
        cells.sort(key=lambda r: number(r["geomean_ms"]) or 0.0)
        fast, slow = cells[0], cells[-1]
        fast_p, slow_p = by_name[fast["cell_name"]], by_name[slow["cell_name"]]
        gaps.append({"row": key, "slow": slow["environment"], "fast": fast["environment"],
                     "ratio": number(slow["geomean_ms"]) / number(fast["geomean_ms"]),
                     "slow_ms": number(slow["geomean_ms"]), "fast_ms": number(fast["geomean_ms"]),
                     "launches": (slow_p["launches"], fast_p["launches"]),
                     "idle_pct": (slow_p["idle_pct"], fast_p["idle_pct"])})
    report = run_dir / "report.md"
    sentences = [line.strip("> ").strip() for line in
                 report.read_text(encoding="utf-8").splitlines() if "in their profiles" in line] \
        if report.is_file() else []
    return gaps + [{"sentence": s} for s in sentences]


# --- the Keras tax, the tiers -----------------------------------------------------------------

def keras_tax(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ok Keras layer cell ÷ the ok native cell of its engine on the same row."""
    native = {(row_key(r), r["api"]): r for r in rows
              if r["workload"] == "layer" and r["status"] == "ok" and r["api"] != "keras"}
    out = []
    for row in rows:
        if row["workload"] != "layer" or row["api"] != "keras" or row["status"] != "ok":
            continue
        twin = native.get((row_key(row), NATIVE_OF_BACKEND.get(row["backend"] or "")))
        keras_ms, native_ms = number(row["geomean_ms"]), number(twin and twin["geomean_ms"])
        if twin and keras_ms and native_ms:
            out.append({"row": row_key(row), "keras": row["environment"],
                        "native": twin["environment"], "keras_ms": keras_ms,
                        "native_ms": native_ms, "tax": keras_ms / native_ms})
    return sorted(out, key=lambda t: -t["tax"])


def tier_gains(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each cell at both tiers: defaults ms, tuned ms, defaults ÷ tuned (one repeat a side)."""
    defaults = {r["cell_name"]: r for r in rows if r["tier"] in ("defaults", "", None)}
    out = []
    for row in rows:
        if row["tier"] != "tuned":
            continue
        base = defaults.get(str(row["cell_name"]).replace("-tier=tuned", ""))
        base_ms, tuned_ms = number(base and base["geomean_ms"]), number(row["geomean_ms"])
        out.append({"cell": base["cell_name"] if base else row["cell_name"],
                    "defaults_ms": base_ms, "tuned_ms": tuned_ms, "status": row["status"],
                    "gain": base_ms / tuned_ms if base_ms and tuned_ms else None})
    return out


def tuning_figures(matrix_runs: Path, ids: dict[str, str]) -> list[dict[str, Any]]:
    """The newest tuning folder of a matrix (<runs>/<name>/tuning/<time>/): per cell its
    tuned.toml entry (the knobs chosen, how the search ended, probes, minutes, the probes'
    own gain) and its probes (tuning/<cell id>/probes.jsonl: knobs, status, ms/step, wall s),
    for the cells of `ids` (a run's defaults cells: their ids by their names)."""
    found = sorted((matrix_runs / "tuning").glob("*/tuned.toml")) \
        if (matrix_runs / "tuning").is_dir() else []
    if not found:
        return []
    root = found[-1].parent
    cells = tomllib.loads(found[-1].read_text(encoding="utf-8")).get("cells", {})
    out = []
    for name, entry in cells.items():
        if name not in ids:
            continue
        path = root / "tuning" / ids[name] / "probes.jsonl"
        probes = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                  if line.strip()] if path.is_file() else []
        out.append({"cell": name, "knobs": entry.get("knobs", {}), "status": entry.get("status"),
                    "probes": entry.get("probes"), "minutes": entry.get("minutes"),
                    "budget_minutes": entry.get("budget_minutes"),
                    "probe_gain": entry.get("probe_gain"),
                    "tried": [{"knobs": p.get("knobs"), "rung": p.get("rung"),
                               "status": p.get("status"), "ms": p.get("ms_per_step"),
                               "wall_s": p.get("wall_s"), "pruned": p.get("pruned")}
                              for p in probes]})
    return out
