"""Merge the records of a run into results.jsonl, summary.csv, report.md, plots/*.png, report.html
and a terminal table."""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from collections import defaultdict
from typing import Any

from . import stats
from .store import Store
from .worker.catalog import AXIS_DEFAULTS, default_sizes

AXIS_KEYS = tuple(AXIS_DEFAULTS)
# Worst first: the status shown for a cell whose repeats disagree.
STATUS_ORDER = ("crashed", "timeout", "oom", "no_gpu", "failed", "not_applicable", "ok")


def _median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _max(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def row_label(record: dict[str, Any]) -> str:
    """'workload (task)' plus every non-default axis (size included: a tiny cell must never sit
    in a full-size row) and every option that is not the size preset's, so cells that differ
    only there get rows of their own."""
    extras = [f"{k}={record[k]}" for k in AXIS_KEYS if record.get(k) != AXIS_DEFAULTS[k]]
    preset = default_sizes(record["workload"], record.get("size") or "full")
    extras += [f"{k}={v}" for k, v in (record.get("options") or {}).items() if preset.get(k) != v]
    return f"{record['workload']} ({record['task']})" + (f" [{', '.join(extras)}]" if extras else "")


def allocator_settings(record: dict[str, Any]) -> dict[str, str]:
    """The allocator's environment switches a record ran with (XLA_PYTHON_CLIENT_PREALLOCATE,
    TF_FORCE_GPU_ALLOW_GROWTH, PYTORCH_CUDA_ALLOC_CONF, ...): 'unset' means the framework's
    default. Measured figures in the same dict (reserved bytes, limits) are left out."""
    return {key: "unset" if value is None else str(value)
            for key, value in (record.get("allocator") or {}).items()
            if key.isupper() and (value is None or isinstance(value, str))}


def energy_summary(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Median energy over the repeats whose window NVML resolves; the reason when none does."""
    measured, notes = [], []
    for record in ok:
        figures, note = stats.energy_of(record)
        if figures:
            measured.append(figures)
        elif note:
            notes.append(note)
    out = {key: _median([m[key] for m in measured])
           for key in ("gpu_energy_j", "energy_per_step_j", "energy_per_item_j")}
    out["energy_note"] = None if measured else (notes[0] if notes else None)
    return out


def cell_summaries(records: list[dict[str, Any]], cell_order: list[str] | None = None,
                   peaks: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One summary per cell, its repeats pooled; in plan order (the manifest's cell list);
    % of peak against the run's calibration peaks (the manifest's)."""
    rank = {cell_id: i for i, cell_id in enumerate(cell_order or [])}
    by_cell: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (rank.get(r["cell_id"], len(rank)), r["cell_id"],
                                                 r["repeat"])):
        by_cell[record["cell_id"]].append(record)
    out = []
    for cell_id, reps in by_cell.items():
        first = reps[0]
        statuses = {r["status"] for r in reps}
        status = next(s for s in STATUS_ORDER if s in statuses)
        summary = {
            "cell_id": cell_id, "cell_name": first["cell_name"], "label": row_label(first),
            **{k: first.get(k) for k in ("environment", "api", "backend", "image", "workload",
                                         "task", "batch_size", *AXIS_KEYS)},
            "status": status,
            "error": next((r["error"] for r in reps if r["status"] == status and r.get("error")), None),
            **stats.pooled(reps),
        }
        ok = [r for r in reps if r["status"] == "ok"]
        summary.update(
            compile_s=_median([r.get("compile_s") for r in ok]),
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
            epoch_s=_median([(r.get("extra") or {}).get("epoch_s") for r in ok]),
            device_name=stats.device_name(ok[0]) if ok else None,
            peak_kind=stats.peak_kind(first.get("precision"),
                                      (ok[0] if ok else first).get("effective")),
            allocator=allocator_settings(ok[0]) if ok else None,
        )
        summary.update(stats.throughput({**summary, "median_ms": summary["median_ms"]}))
        out.append(summary)
    seen: set[tuple[str, int, str]] = set()
    for summary in out:
        slot = (summary["label"], summary["batch_size"], summary["environment"])
        if slot in seen:
            # Two cells on one table slot would hide one of them: give it a row of its own.
            summary["label"] += f" #{summary['cell_id']}"
        seen.add((summary["label"], summary["batch_size"], summary["environment"]))
    stats.add_fraction_of_peak(out, peaks)
    return out


CSV_COLUMNS = ("cell_id", "cell_name", "environment", "api", "backend", "workload", "task",
               "batch_size", *AXIS_KEYS, "status", "repeats", "repeats_ok", "median_ms", "mean_ms",
               "p10_ms", "p90_ms", "min_ms", "max_ms", "stdev_ms", "samples", "iqr_ms",
               "median_ci_low_ms", "median_ci_high_ms", "cv", "cv_repeats", "compile_s",
               "train_s", "epoch_s", "items_per_s", "achieved_tflops", "device_name", "peak_tflops",
               "fraction_of_peak", "rss_initial_mb",
               "rss_peak_mb", "vram_initial_mb", "vram_peak_mb", "nvml_memory_peak_mb",
               "gpu_energy_j", "energy_per_step_j", "energy_per_item_j", "energy_note",
               "gpu_power_mean_w", "cpu_util_mean", "loss_first", "loss_last",
               "accuracy", "warnings", "error")


def summary_csv(summaries: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for summary in summaries:
        row = dict(summary)
        if row.get("error"):
            row["error"] = row["error"].splitlines()[0][:300]
        row["warnings"] = "; ".join(row.get("warnings") or [])
        writer.writerow(row)
    return buffer.getvalue()


SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1e5:   # 191.6 G, not 191,556,811,552
        scale, prefix = next((f, p) for f, p in SI_PREFIXES if abs(value) >= f)
        return f"{value / scale:.4g} {prefix}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def _cell_text(summary: dict[str, Any] | None, key: str, best: float | None) -> str:
    if summary is None:
        return ""
    if summary["status"] == "not_applicable":
        return "NA"
    if summary["status"] != "ok":
        return summary["status"]
    value = summary.get(key)
    text = _fmt(value)
    return f"**{text}**" if best is not None and value == best else text


def pivot(summaries: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, int]],
                                                    dict[tuple[str, int, str], dict[str, Any]]]:
    """Environments (columns), (label, batch size) rows, and the summary at each crossing."""
    environments: list[str] = []
    rows: list[tuple[str, int]] = []
    grid: dict[tuple[str, int, str], dict[str, Any]] = {}
    for summary in summaries:
        row = (summary["label"], summary["batch_size"])
        if summary["environment"] not in environments:
            environments.append(summary["environment"])
        if row not in rows:
            rows.append(row)
        grid[(*row, summary["environment"])] = summary
    return environments, rows, grid


KERAS3_API, KERAS2_API = "keras", "tf-keras"


def keras_speedups(summaries: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (row label, batch size): the best (fastest) Keras 3 environment and, where a Keras 2
    (tf-keras) cell of the row ran, its speedup = Keras 2 ms / best Keras 3 ms (the Keras 3
    benchmark page's layout). Empty unless the run has both kinds of environment."""
    apis = {s["api"] for s in summaries}
    if not {KERAS3_API, KERAS2_API} <= apis:
        return {}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    _, rows, grid = pivot(summaries)
    for row in rows:
        cells = [s for (label, batch, _), s in grid.items() if (label, batch) == row
                 and s["status"] == "ok" and s.get("median_ms") is not None]
        keras3 = [s for s in cells if s["api"] == KERAS3_API]
        keras2 = [s for s in cells if s["api"] == KERAS2_API]
        if not keras3:
            continue
        best = min(keras3, key=lambda s: s["median_ms"])
        entry = {"best_env": best["environment"], "best_backend": best.get("backend"),
                 "best_ms": best["median_ms"], "keras2_env": None, "keras2_ms": None,
                 "speedup": None}
        if keras2:
            fastest2 = min(keras2, key=lambda s: s["median_ms"])
            entry.update(keras2_env=fastest2["environment"], keras2_ms=fastest2["median_ms"],
                         speedup=fastest2["median_ms"] / best["median_ms"])
        out[row] = entry
    return out


def allocator_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """One line per environment: its allocator settings (every distinct set, should cells differ)."""
    seen: dict[str, list[str]] = defaultdict(list)
    for s in summaries:
        if s.get("allocator") is None:  # no ok repeat: nothing ran
            continue
        shown = ", ".join(f"{k}={v}" for k, v in sorted(s["allocator"].items()))
        if shown not in seen[s["environment"]]:
            seen[s["environment"]].append(shown)
    return [f"- `{env}`: " + ("; ".join(sets) if any(sets) else "not recorded")
            for env, sets in seen.items()]


def markdown_table(summaries: list[dict[str, Any]], key: str, lower_is_better: bool = True,
                   bold_best: bool = True, keras_columns: bool = False) -> str:
    """Rows × environments of one summary key. With keras_columns (and both Keras 3 and Keras 2
    environments in the run), two more columns: the best Keras 3 backend and its speedup over
    Keras 2, computed on median ms/step whatever `key` is."""
    environments, rows, grid = pivot(summaries)
    speedups = keras_speedups(summaries) if keras_columns else {}
    extra_head = " Best Keras 3 | Speedup of best Keras 3 over Keras 2 |" if speedups else ""
    lines = ["| Workload (task) | Batch size | " + " | ".join(environments) + " |" + extra_head,
             "|---|---:|" + "---:|" * len(environments) + ("---:|---:|" if speedups else "")]
    for label, batch in rows:
        values = [grid[(label, batch, e)].get(key) for e in environments
                  if (label, batch, e) in grid and grid[(label, batch, e)]["status"] == "ok"]
        values = [v for v in values if v is not None]
        best = (min(values) if lower_is_better else max(values)) if values and bold_best else None
        cells = [_cell_text(grid.get((label, batch, e)), key, best) for e in environments]
        if speedups:
            entry = speedups.get((label, batch))
            cells.append(f"{_fmt(entry['best_ms'])} ({entry['best_backend']})" if entry else "–")
            cells.append(f"{entry['speedup']:.2f}×" if entry and entry["speedup"] else "–")
        lines.append(f"| {label} | {batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pair(first: float | None, second: float | None) -> str:
    return "–" if first is None and second is None else f"{_fmt(first)} / {_fmt(second)}"


def training_table(summaries: list[dict[str, Any]]) -> str | None:
    """One line per fit cell (rows in matrix order, environments in column order)."""
    fits = [s for s in summaries if s["task"] == "fit" and s["status"] != "not_applicable"]
    if not fits:
        return None
    environments, rows, _ = pivot(summaries)
    fits.sort(key=lambda s: (rows.index((s["label"], s["batch_size"])),
                             environments.index(s["environment"])))
    lines = ["| Workload (task) | Batch size | Environment | Epoch s | Train s (timed) | Accuracy | "
             "Loss first → last | RSS initial / peak MB | VRAM initial / peak MB |",
             "|---|---:|---|---:|---:|---:|---|---:|---:|"]
    for s in fits:
        if s["status"] != "ok":
            lines.append(f"| {s['label']} | {s['batch_size']} | {s['environment']} | {s['status']} "
                         "| | | | | |")
            continue
        loss = (f"{_fmt(s['loss_first'], 3)} → {_fmt(s['loss_last'], 3)}"
                if s.get("loss_first") is not None else "–")
        acc = f"{s['accuracy']:.3f}" if s.get("accuracy") is not None else "–"
        lines.append(f"| {s['label']} | {s['batch_size']} | {s['environment']} | "
                     f"{_fmt(s.get('epoch_s'))} | {_fmt(s.get('train_s'))} | {acc} | {loss} | "
                     f"{_pair(s.get('rss_initial_mb'), s.get('rss_peak_mb'))} | "
                     f"{_pair(s.get('vram_initial_mb'), s.get('vram_peak_mb'))} |")
    return "\n".join(lines)


def _percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:.1f} %"


def _ci_text(s: dict[str, Any]) -> str:
    if s.get("median_ci_low_ms") is None:
        return "–"
    return f"{_fmt(s['median_ci_low_ms'])}–{_fmt(s['median_ci_high_ms'])}"


def report_markdown(manifest: dict[str, Any], summaries: list[dict[str, Any]],
                    plots: list[Any] | None = None) -> str:
    """The Markdown report; `plots` (runner.plots.Plot: a path relative to the run folder, or a
    note on why it was skipped) are listed at the end."""
    parts = [f"# Benchmark report: {manifest.get('name')}", ""]
    host = manifest.get("host", {})
    parts.append(f"Run `{manifest.get('run_id')}` · profile **{manifest.get('profile')}** "
                 f"({manifest.get('profile_reason')}) · executor {manifest.get('executor')} · "
                 f"{manifest.get('started_at')} · CPU {host.get('cpu_model', '?')} "
                 f"× {host.get('cpu_count', '?')} · GPU {host.get('gpu_name') or 'none'}")
    parts += ["", "## Median time per step (ms, lower is better; best in bold)", "",
              markdown_table(summaries, "median_ms", keras_columns=True), ""]
    parts += ["Each value is the median of every timed step of every repeat (each repeat a fresh "
              "process); warm-up steps, the first of which includes compilation, are excluded. "
              "NA: the combination does not exist in that environment.", ""]
    if keras_speedups(summaries):
        parts += ["Best Keras 3: the fastest Keras 3 backend of the row (its backend in brackets); "
                  "speedup: Keras 2 (tf-keras) ms/step divided by that, above 1 when Keras 3 is "
                  "faster.", ""]
    flagged = [s for s in summaries if s.get("warnings")]
    if flagged:
        parts += ["## Warnings", "",
                  f"Numbers of these cells deserve caution (CV limit {stats.CV_LIMIT * 100:.0f} %, "
                  f"minimum timed window {stats.MIN_WINDOW_S:.0f} s):", ""]
        parts += [f"- `{s['cell_name']}`: " + "; ".join(s["warnings"]) for s in flagged]
        parts.append("")
    training = training_table(summaries)
    if training:
        parts += ["## Training", "", training, "",
                  "Epoch s: one epoch as the workload reports it; train s: the timed loop; "
                  "medians over repeats, peaks the largest repeat.", ""]
    parts += ["## Peak memory", "", "Process RSS peak (MB):", "",
              markdown_table(summaries, "rss_peak_mb", bold_best=False), ""]
    if any(s.get("vram_peak_mb") is not None for s in summaries):
        parts += ["Framework-native device memory peak (MB):", "",
                  markdown_table(summaries, "vram_peak_mb", bold_best=False), ""]
    if any(s.get("nvml_memory_peak_mb") is not None for s in summaries):
        parts += ["NVML device memory used, peak (MB): the whole device, including what an "
                  "allocator reserved or preallocated, so read it with the settings below:", "",
                  markdown_table(summaries, "nvml_memory_peak_mb", bold_best=False), "",
                  "Allocator settings in force (unset: the framework's default):", "",
                  *allocator_lines(summaries), ""]
    if any(s.get("energy_per_step_j") is not None or s.get("energy_note") for s in summaries):
        parts += ["## Energy per step (J, NVML; lower is better)", "",
                  markdown_table(summaries, "energy_per_step_j"), "",
                  "The NVML total-energy counter's delta over the timed window divided by the "
                  "steps in it (per item: also by the batch); – where the window was too short "
                  "for the counter to resolve, never 0:", ""]
        parts += [f"- `{s['cell_name']}`: {s['energy_note']}" for s in summaries
                  if s.get("energy_note")]
        parts.append("")
    parts += ["## Cells", "",
              "| Cell | Status | Repeats ok | Median ms | 95 % CI of median | IQR ms | p10–p90 ms | "
              "CV | CV of repeat medians | Compile s | Items/s | TFLOP/s | % of peak | "
              "Loss first → last | Accuracy |",
              "|---|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for s in summaries:
        spread = f"{_fmt(s['p10_ms'])}–{_fmt(s['p90_ms'])}" if s["median_ms"] is not None else "–"
        cv = f"{s['cv'] * 100:.1f} %" if s.get("cv") is not None else "–"
        cv_repeats = f"{s['cv_repeats'] * 100:.1f} %" if s.get("cv_repeats") is not None else "–"
        loss = (f"{_fmt(s['loss_first'], 3)} → {_fmt(s['loss_last'], 3)}"
                if s.get("loss_first") is not None else "–")
        acc = f"{s['accuracy']:.3f}" if s.get("accuracy") is not None else "–"
        parts.append(f"| `{s['cell_name']}` | {s['status']} | {s['repeats_ok']}/{s['repeats']} | "
                     f"{_fmt(s['median_ms'])} | {_ci_text(s)} | {_fmt(s.get('iqr_ms'))} | "
                     f"{spread} | {cv} | {cv_repeats} | {_fmt(s['compile_s'])} | "
                     f"{_fmt(s['items_per_s'])} | {_fmt(s['achieved_tflops'], 4)} | "
                     f"{_percent(s.get('fraction_of_peak'))} | {loss} | {acc} |")
    parts += ["", "95 % CI: distribution-free (binomial order-statistic) interval of the median of "
              "the pooled samples; CV: stdev / mean of the pooled samples; % of peak: achieved "
              "TFLOP/s over the run's calibration peak for the same device and precision (TF32 "
              "counted apart from float32): dense matmuls at several sizes measured before the "
              "cells, the fastest kept — a measured peak, never a cell of the run and never a "
              "datasheet figure; – without `[run] calibrate = true`.", ""]
    calibration = manifest.get("calibration") or {}
    if calibration.get("peaks"):
        parts += ["## Measured peak", "", "| Device | Precision | TFLOP/s | Environment | n |",
                  "|---|---|---:|---|---:|"]
        parts += [f"| {p['device']} | {p['kind']} | {_fmt(p['tflops'], 4)} | {p['environment']} "
                  f"| {p.get('n')} |" for p in calibration["peaks"]]
        parts += ["", f"How: {calibration.get('method')}.", ""]
    problems = [s for s in summaries if s["status"] not in ("ok", "not_applicable")]
    if problems:
        parts += ["## Problems", ""]
        for s in problems:
            first = (s.get("error") or "").strip().splitlines()
            parts.append(f"- `{s['cell_name']}`: **{s['status']}** — {first[-1] if first else ''}")
        parts.append("")
    if plots:
        parts += ["## Plots", ""]
        for plot in plots:
            parts += [f"![{plot.title}]({plot.path})" if plot.path
                      else f"{plot.title}: skipped, {plot.note}.", ""]
    return "\n".join(parts)


def terminal_table(summaries: list[dict[str, Any]], title: str):
    """A rich table of median ms/step, rows × environments (labels escaped: `[precision=...]`
    is not markup)."""
    from rich.markup import escape
    from rich.table import Table

    environments, rows, grid = pivot(summaries)
    table = Table(title=title, title_justify="left")
    table.add_column("Workload (task)")
    table.add_column("Batch", justify="right")
    for env in environments:
        table.add_column(escape(env), justify="right")
    for label, batch in rows:
        ok = [grid[(label, batch, e)]["median_ms"] for e in environments
              if (label, batch, e) in grid and grid[(label, batch, e)]["status"] == "ok"]
        best = min(ok) if ok else None
        cells = []
        for env in environments:
            text = _cell_text(grid.get((label, batch, env)), "median_ms", best)
            if text.startswith("**"):
                text = f"[bold green]{text.strip('*')}[/]"
            elif text and text not in ("NA",) and not text[0].isdigit() and text != "–":
                text = f"[red]{text}[/]"
            if (grid.get((label, batch, env)) or {}).get("warnings"):
                text += " [yellow]![/]"
            cells.append(text)
        table.add_row(escape(label), str(batch), *cells)
    flagged = sum(1 for s in summaries if s.get("warnings"))
    table.caption = ("median ms/step over all repeats; best in green; NA = not applicable"
                     + (f"; [yellow]![/] {flagged} cell(s) with warnings (report.md)" if flagged else ""))
    return table


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def write_reports(store: Store, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Rewrite every merged output of a run from its cell records (idempotent). The plots and the
    HTML page are optional extras: when they fail, a warning names why and the rest is kept."""
    records = store.records()
    summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])],
                               (manifest.get("calibration") or {}).get("peaks"))
    store.write_text("results.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    store.write_text("summary.csv", summary_csv(summaries))
    plots: list[Any] = []
    try:
        from .plots import write_plots

        plots = write_plots(store.root, summaries)
    except Exception as exc:  # noqa: BLE001 - a plot must never cost the tables
        _warn(f"plots not written ({type(exc).__name__}: {exc})")
    markdown = report_markdown(manifest, summaries, plots)
    store.write_text("report.md", markdown)
    try:
        from . import html_report

        store.write_text("report.html", html_report.render(markdown, store.root,
                                                           title=f"Benchmark report: {manifest.get('name')}"))
    except Exception as exc:  # noqa: BLE001
        _warn(f"report.html not written ({type(exc).__name__}: {exc})")
    return summaries
