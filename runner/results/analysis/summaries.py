"""Summaries: a run's records summarised per cell (statistics, memory, energy, % of peak), then
pivoted to the Keras-3-benchmarks table (rows × environment columns). Plain data, no formatting: every renderer (terminal, Markdown, HTML, files,
plots, compare) reads these and nothing else."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from ...machine.profile import cv_for, spread_for
from ...worker import catalog
from ...worker.catalog import AXIS_DEFAULTS, default_sizes
from ..data.records import throughput
from ..data.types import CellSummary, Record
from . import conditions, cost, decoding, derived, power, quantized, stats
from .peaks import (add_fraction_of_peak, device_name, peak_kind, ran_on_gpu, tf32_paths,
                    tf32_state)

AXIS_KEYS = catalog.setting_axes()     # the axes a cell varies besides task and batch size
# A cell's time in every comparison (tables, bold, fastest, best Keras 3, throughput, the
# published figures): the geometric mean of its repeat medians, the ratios' own estimator.
TIME_KEY: Final = "geomean_ms"
# Worst first: the status shown for a cell whose repeats disagree.
STATUS_ORDER = ("crashed", "timeout", "oom", "no_gpu", "failed", "not_applicable", "ok")


def _median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _max(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def option_preset(cell: Mapping[str, Any]) -> dict[str, Any]:
    """The options a cell runs with when its benchmark sets none: a user workload's defaults,
    or the size preset of a built-in one."""
    user = cell.get("user_workload")
    if isinstance(user, dict) and isinstance(user.get("defaults"), dict):
        return user["defaults"]
    return default_sizes(cell["workload"], cell.get("size") or "full")


def row_label(record: Mapping[str, Any], without: str | None = None) -> str:
    """'workload (task)' plus every non-default axis (size included: a tiny cell must never sit
    in a full-size row) and every option that is not the size preset's, so cells that differ
    only there get rows of their own. `without`: an axis (or "options.NAME") left out, for the
    rows of that axis's effects."""
    workload = catalog.WORKLOADS.get(record["workload"])
    uses_data = workload is not None and workload.uses_data_axis
    extras = [f"{k}={record[k]}" for k in AXIS_KEYS
              if record.get(k, AXIS_DEFAULTS[k]) != AXIS_DEFAULTS[k]
              and (k != "data" or uses_data) and k != without]
    preset = option_preset(record)
    extras += [f"{k}={v}" for k, v in (record.get("options") or {}).items() if preset.get(k) != v
               and f"options.{k}" != without]
    return f"{record['workload']} ({record['task']})" + (f" [{', '.join(extras)}]" if extras else "")


def allocator_settings(record: Mapping[str, Any]) -> dict[str, str]:
    """The allocator's environment switches a record ran with (XLA_PYTHON_CLIENT_PREALLOCATE,
    TF_FORCE_GPU_ALLOW_GROWTH, PYTORCH_CUDA_ALLOC_CONF, ...): 'unset' means the framework's
    default. Measured figures in the same dict (reserved bytes, limits) are left out."""
    return {key: "unset" if value is None else str(value)
            for key, value in (record.get("allocator") or {}).items()
            if key.isupper() and (value is None or isinstance(value, str))}


def energy_summary(ok: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median energy over the repeats whose window NVML resolves; the reason when none does."""
    measured, notes = [], []
    for record in ok:
        figures, note = stats.energy_of(record)
        if figures:
            measured.append(figures)
        elif note:
            notes.append(note)
    out: dict[str, Any] = {key: _median([m[key] for m in measured])
           for key in ("gpu_energy_j", "energy_per_step_j", "energy_per_item_j",
                       "energy_per_step_above_idle_j")}
    out["gpu_idle_power_w"] = _median([r.get("gpu_idle_power_w") for r in ok])
    out["energy_note"] = None if measured else (notes[0] if notes else None)
    return out


def tf32_summary(ok: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """tf32_effective: whether the cell's dense float32 work ran on TF32 on a path its workload
    uses (peaks.tf32_state; None when unknown or when its repeats disagree; the `tf32` key is
    the matrix's request); tf32_paths: each of those paths' state (None where the repeats
    disagree); and the worker's detail of how that was decided."""
    states = {tf32_state(r) for r in ok}
    paths = {tuple(sorted(tf32_paths(r).items())) for r in ok}
    detail = next(((r.get("effective") or {}).get("tf32_detail") for r in ok
                   if (r.get("effective") or {}).get("tf32_detail") is not None), None)
    return {"tf32_effective": states.pop() if len(states) == 1 else None,
            "tf32_paths": dict(paths.pop()) if len(paths) == 1 else None, "tf32_detail": detail}


def tf32_key(summary: Mapping[str, Any]) -> Any:
    """What decides whether two float32 cells ran the same arithmetic: each dense path's TF32
    state (a torch CNN's TF32 convolutions and float32 matmuls against JAX's TF32 for both are
    different arithmetic); the cell's state where the paths are not known."""
    paths = summary.get("tf32_paths")
    return tuple(sorted(paths.items())) if paths is not None else summary.get("tf32_effective")


def tf32_differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two ok float32 cells whose dense paths did not run the same way (TF32 in one, full
    float32 or not recorded in the other): their ratio compares different arithmetic."""
    return all(s.get("precision") == "float32" and s.get("status") == "ok" for s in (a, b)) \
        and tf32_key(a) != tf32_key(b)


def tf32_rows(summaries: list[CellSummary]) -> set[tuple[str, int]]:
    """(label, batch size) of the float32 rows whose measured cells did not all run their dense
    paths the same way: TF32 on in some, off or not recorded in others. Every table marks
    them, and the effects, findings and fastest counts leave them out: their environments
    compare different arithmetic."""
    states: dict[tuple[str, int], set[Any]] = defaultdict(set)
    for s in summaries:
        if s["status"] == "ok" and s.get("precision") == "float32":
            states[(s["label"], s["batch_size"])].add(tf32_key(s))
    return {row for row, seen in states.items() if len(seen) > 1}


TF32_MARK = "†"
TF32_NOTE = (f"{TF32_MARK} The environments of this row did not all run their float32 matmuls "
             "and convolutions the same way: TF32 tensor cores in some, full float32 (or not "
             "recorded) in others, so the row compares different arithmetic; it is left out of "
             "the effects' geometric means and the fastest counts (the TF32 section names the "
             "cells; `tf32 = true` or `false` in the matrix equalises).")


def warning_groups(summary: dict[str, Any], records: list[Record],
                   profile: dict[str, Any] | None) -> None:
    """The statistics' warnings and the machine's conditions (conditions.py, clocks judged
    against the machine profile's spread), grouped by kind in `warning_groups` and all of
    them in `warnings`."""
    groups = conditions.warnings_by_kind(records, spread_for(profile, summary.get("workload")))
    if summary["warnings"]:
        groups = {"statistics": list(summary["warnings"]), **groups}
    summary["warning_groups"] = groups
    summary["warnings"] = [text for texts in groups.values() for text in texts]



def _block_size(ok: list[Record]) -> int | None:
    """The calls each timed sample of the cell's repeats holds (one block size per cell); None
    without ok repeats or where they differ."""
    sizes = {r.get("calls_per_sample") or 1 for r in ok}
    return sizes.pop() if len(sizes) == 1 else None


def repeat_figures(ok: list[Record], first: Record) -> dict[str, Any]:
    """The figures of a cell's ok repeats besides its timing: the medians of where the time went,
    memory peaks, energy, the model's loss and accuracy, what ran, and its answer."""
    return dict(
        compile_s=_median([r.get("compile_s") for r in ok]),
        import_s=_median([r.get("import_s") for r in ok]),
        setup_s=_median([r.get("setup_s") for r in ok]),
        warmup_total_s=_median([sum(r.get("warmup_s") or []) or None for r in ok]),
        wall_s=_median([r.get("wall_s") for r in ok]),
        train_s=_median([r.get("train_s") for r in ok]),
        items_per_step=(ok[0] if ok else first).get("items_per_step"),
        flops_per_step=(ok[0] if ok else first).get("flops_per_step"),
        rss_initial_mb=_median([r.get("rss_initial_mb") for r in ok]),
        rss_peak_mb=_max([r.get("rss_peak_mb") for r in ok]),
        vram_initial_mb=_median([r.get("vram_initial_mb") for r in ok]),
        vram_peak_mb=_max([r.get("vram_peak_mb") for r in ok]),
        nvml_memory_peak_mb=_max([r.get("nvml_memory_peak_mb") for r in ok]),
        **energy_summary(ok),
        gpu_power_mean_w=_median([r.get("gpu_power_mean_w") for r in ok]),
        cpu_util_mean=_median([r.get("cpu_util_mean") for r in ok]),
        loss_first=_median([r.get("loss_first") for r in ok]),
        loss_last=_median([r.get("loss_last") for r in ok]),
        accuracy=_median([r.get("accuracy") for r in ok]),
        calls_per_sample=_block_size(ok),
        epoch_s=_median([(r.get("extra") or {}).get("epoch_s") for r in ok]),
        epoch_measured_s=_median([derived.measured_epoch_s(r) for r in ok]),
        study_step_ms=_median([derived.study_step_ms(r) for r in ok]),
        generate_work=decoding.generate_work(ok),
        device_name=device_name(ok[0]) if ok else None,
        on_gpu=bool(ok) and ran_on_gpu(ok[0]),
        jit_compile=((ok[0] if ok else first).get("effective") or {}).get("jit_compile"),
        data_parallel=((ok[0] if ok else first).get("effective") or {}).get("data_parallel"),
        **tf32_summary(ok),
        allocator=allocator_settings(ok[0]) if ok else None,
        # What the cell computed on the seeded inputs (its first ok repeat's fingerprint);
        # runner.results.analysis.answers compares it across the row and sets answer_check.
        answer=next((r["answer"] for r in ok if r.get("answer") is not None), None),
        answer_note=next(((r.get("extra") or {}).get("answer_note") for r in ok
                          if (r.get("extra") or {}).get("answer_note")), None),
        # A quantized cell's mode, library, layers, model bytes and error (quantized.py).
        **quantized.summary_fields(ok),
    )

def cell_summaries(records: list[Record], cell_order: list[str] | None = None,
                   peaks: list[dict[str, Any]] | None = None,
                   profile: dict[str, Any] | None = None,
                   price: dict[str, Any] | None = None) -> list[CellSummary]:
    """One summary per cell, the repeat as the unit (stats.across_repeats); in plan order (the
    manifest's cell list); % of peak against the run's calibration peaks (the manifest's);
    warnings grouped by kind, clocks judged against the machine profile (the manifest's); the
    cost figures at the run's price (the manifest's cost.price; cost.py)."""
    rank = {cell_id: i for i, cell_id in enumerate(cell_order or [])}
    by_cell: dict[str, list[Record]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (rank.get(r["cell_id"], len(rank)), r["cell_id"],
                                                 r["repeat"])):
        by_cell[record["cell_id"]].append(record)
    out: list[CellSummary] = []
    for cell_id, reps in by_cell.items():
        first = reps[0]
        statuses = {r["status"] for r in reps}
        status = next(s for s in STATUS_ORDER if s in statuses)
        summary: dict[str, Any] = {
            "cell_id": cell_id, "cell_name": first["cell_name"], "label": row_label(first),
            **{k: first.get(k) for k in ("environment", "api", "backend", "image", "workload",
                                         "task", "batch_size", *AXIS_KEYS)},
            "options": first.get("options") or {},
            "user_workload": first.get("user_workload"),
            "status": status,
            "error": next((r["error"] for r in reps if r["status"] == status and r.get("error")), None),
            **stats.across_repeats(reps, cv_for(profile, first.get("workload"))),
        }
        warning_groups(summary, reps, profile)
        ok = [r for r in reps if r["status"] == "ok"]
        summary.update(repeat_figures(ok, first))
        summary.update(decoding.first_token_figures(ok, summary[TIME_KEY]))
        medians = summary["repeat_medians_ms"]
        # What a comparison of this cell with a re-run like it could have seen (power.py: at
        # the upper bound of its spread, an estimate)
        summary["detectable_change"] = power.estimated_detectable(medians, medians)
        summary["peak_kind"] = peak_kind(first.get("precision"), summary["tf32_effective"],
                                         first["workload"])
        summary.update(throughput({**summary, "median_ms": summary[TIME_KEY]}))
        summary.update(cost.figures(summary, reps, price))
        out.append(cast(CellSummary, summary))
    seen: set[tuple[str, int, str]] = set()
    for cell in out:
        slot = (cell["label"], cell["batch_size"], cell["environment"])
        if slot in seen:
            # Two cells on one table slot would hide one of them: give it a row of its own.
            cell["label"] += f" #{cell['cell_id']}"
        seen.add((cell["label"], cell["batch_size"], cell["environment"]))
    add_fraction_of_peak(out, peaks)
    return out


def pivot(summaries: list[CellSummary]) -> tuple[list[str], list[tuple[str, int]],
                                                    dict[tuple[str, int, str], CellSummary]]:
    """Environments (columns), (label, batch size) rows, and the summary at each crossing."""
    environments: list[str] = []
    rows: list[tuple[str, int]] = []
    grid: dict[tuple[str, int, str], CellSummary] = {}
    for summary in summaries:
        row = (summary["label"], summary["batch_size"])
        if summary["environment"] not in environments:
            environments.append(summary["environment"])
        if row not in rows:
            rows.append(row)
        grid[(*row, summary["environment"])] = summary
    return environments, rows, grid


# The Keras table's column groups: each API's record says which it is in (catalog/apis.py).
KERAS3, KERAS2, NATIVE = "keras3", "keras2", "native"
DIFFERENT_MODELS = ("stable_diffusion",)   # Keras 2 and Keras 3 columns run different models


def table_group(summary: Mapping[str, Any]) -> str | None:
    """A cell's column group in the Keras table: KERAS3, KERAS2, NATIVE or None (its API's
    record shows it in none, or this runner declares no such API: an old run's)."""
    record = catalog.API_RECORDS.get(str(summary.get("api")))
    return record.keras_table if record is not None else None


def model_family(summary: Mapping[str, Any]) -> str:
    """Which model a cell's row runs: Keras 2's Stable Diffusion (keras-cv v1.4) and Keras 3's
    (keras-hub SD3) are different models, so neither their times nor their answers compare."""
    if summary["workload"] in DIFFERENT_MODELS and table_group(summary) == KERAS2:
        return "keras2"
    return ""


def fixed_costs(summaries: list[CellSummary]) -> list[dict[str, Any]]:
    """Per environment, where a worker process's time goes outside its timed window (medians
    over the environment's ok cells): import, setup (model and data), warm-up (compilation
    included), the rest (interpreter start, calibration of blocks, telemetry, writing), and the
    fixed cost in all = wall − timed window."""
    out = []
    for env in dict.fromkeys(s["environment"] for s in summaries):
        cells = [s for s in summaries if s["environment"] == env and s["status"] == "ok"
                 and s.get("wall_s") is not None and s.get("train_s") is not None]
        if not cells:
            continue
        fixed = [(s.get("wall_s") or 0.0) - (s.get("train_s") or 0.0) for s in cells]  # both set
        known = [(s.get("import_s") or 0) + (s.get("setup_s") or 0) + (s.get("warmup_total_s") or 0)
                 for s in cells]
        out.append({"environment": env, "cells": len(cells),
                    "import_s": _median([s.get("import_s") for s in cells]),
                    "setup_s": _median([s.get("setup_s") for s in cells]),
                    "warmup_s": _median([s.get("warmup_total_s") for s in cells]),
                    "other_s": _median([f - k for f, k in zip(fixed, known, strict=True)]),
                    "fixed_s": _median(fixed),
                    "timed_s": _median([s["train_s"] for s in cells])})
    return out
