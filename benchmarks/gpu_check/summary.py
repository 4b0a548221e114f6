"""What the GPU check reports: each runner part's figures from the run folder it left (the
runner's own summary.csv and records), then one screen for all parts (summary.txt, printed) and
the same as JSON (summary.json). Standard library only (check.py's reason)."""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from context import Context, Outcome
from out_folder import atomic_write

CELL_COLUMNS = ("cell_name", "environment", "workload", "task", "batch_size", "precision", "jit",
                "status", "geomean_ms", "achieved_tflops", "peak_tflops", "fraction_of_peak",
                "tf32_effective", "device_name", "ttft_ms", "tokens_per_s", "energy_per_step_j",
                "energy_per_step_above_idle_j", "gpu_idle_power_w", "compile_s", "wall_s",
                "error")


def run_figures(run_dir: Path, on_gpu: bool) -> dict[str, Any]:
    """From a finished run folder: each cell's summary row (summary.csv, written by the runner),
    what its records say of the device (ran on the GPU, clock events), and the problems."""
    problems: list[str] = []
    rows = []
    summary = run_dir / "summary.csv"
    if summary.is_file():
        with summary.open(encoding="utf-8", newline="") as handle:
            rows = [{k: row.get(k) for k in CELL_COLUMNS} for row in csv.DictReader(handle)]
    else:
        problems.append(f"no summary.csv in {run_dir.name}")
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
    # A benchmark of the other profile is planned "not applicable": not this check's cell.
    rows = [row for row in rows if "profile only" not in (row["error"] or "")]
    for row in rows:
        if row["status"] not in ("ok", "not_applicable"):
            error = (row["error"] or "").strip().splitlines()
            problems.append(f"{row['cell_name']}: {row['status']} {error[0][:200] if error else ''}")
    if on_gpu and on_gpu_count < records:
        problems.append(f"{records - on_gpu_count} of {records} records did not compute on the GPU")
    return {"cells": rows, "records": records, "records_on_gpu": on_gpu_count,
            "clock_events": sorted(events), "run": run_dir.name, "problems": problems}


def fmt(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    if number != number:
        return "—"
    return f"{number:.{digits}g}"


def summary_lines(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    """One screen: per part its status, time against estimate and its figures."""
    total = time.monotonic() - ctx.started
    lines = [f"GPU check ({'dry run, ' if ctx.dry_run else ''}profile {ctx.profile}): "
             f"{total:.0f} s of a {ctx.budget_s:.0f} s budget"]
    for outcome in outcomes:
        took = f"{outcome.elapsed_s:.0f} s" if outcome.elapsed_s is not None else "—"
        lines.append(f"[{outcome.status:>7}] {outcome.name:<12} {took:>6} (est. "
                     f"{outcome.estimate_s:.0f} s)  {outcome.detail}"[:200])
        lines += [f"          {line}" for line in figure_lines(outcome)]
    return lines


def figure_lines(outcome: Outcome) -> list[str]:
    figures = outcome.figures
    if outcome.name == "overhead":
        return [f"{p['api']} {p['precision']}: runner {fmt(p['runner_ms'])} ms ÷ bare "
                f"{fmt(p['bare_ms'])} ms = {p['runner_over_bare']:.3f}; in one process, "
                f"clock ÷ bare {p['clock_over_bare']:.3f}" for p in figures.get("pairs", [])]
    if outcome.name == "profiles":
        return [f"{p['cell']}: {p['status']} {p['source']} on {p['device']}, {fmt(p['profiled_ms'])} "
                f"ms/step (×{fmt(p['overhead'])}), idle {fmt(p['idle_pct'])} %, "
                f"{fmt(p['launches'])} launches/step; top {p['top']}"
                for p in figures.get("profiles", [])]
    if outcome.name == "pytest-gpu":
        return [", ".join(f"{n} {w}" for w, n in figures.items())] if figures else []
    if outcome.name == "nvml" and figures.get("gpu"):
        gpu = figures["gpu"]
        meta, clocks, power = gpu.get("metadata", {}), gpu.get("clocks", {}), gpu.get("power", {})
        return [f"{gpu.get('name')}, driver {meta.get('driver_version')}; SM clock now "
                f"{clocks.get('sm_now_mhz')} of {clocks.get('sm_max_mhz')} MHz, events "
                f"{clocks.get('events_now')}; power limit {fmt(power.get('limit_w'))} W "
                f"(default {fmt(power.get('default_limit_w'))}); idle "
                f"{fmt((gpu.get('idle_power') or {}).get('gpu_idle_power_w'))} W"]
    out = []
    for row in figures.get("cells", []):
        extra = ""
        if row.get("fraction_of_peak"):
            extra += (f" {fmt(row['achieved_tflops'])} TFLOP/s ({float(row['fraction_of_peak']):.0%}"
                      f" of the measured {fmt(row['peak_tflops'])}; TF32 {row['tf32_effective']})")
        if row.get("ttft_ms"):
            extra += f" TTFT {fmt(row['ttft_ms'])} ms, {fmt(row['tokens_per_s'])} tok/s"
        if row.get("energy_per_step_j"):
            extra += (f" {fmt(row['energy_per_step_j'])} J/step "
                      f"({fmt(row['energy_per_step_above_idle_j'])} above idle)")
        out.append(f"{row['cell_name']}: {row['status']} {fmt(row['geomean_ms'])} ms{extra}")
    if "records" in figures:
        out.append(f"{figures['records_on_gpu']} of {figures['records']} records on the GPU; "
                   f"clock events: {', '.join(figures['clock_events']) or 'none'}")
    return out


def write_summary(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    lines = summary_lines(ctx, outcomes)
    atomic_write(ctx.out / "summary.txt", "\n".join(lines) + "\n")
    atomic_write(ctx.out / "summary.json", json.dumps(
        {"profile": ctx.profile, "dry_run": ctx.dry_run, "budget_s": ctx.budget_s,
         "elapsed_s": time.monotonic() - ctx.started,
         "parts": [dataclasses.asdict(o) for o in outcomes]}, indent=1, default=str))
    return lines
