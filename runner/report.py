"""Merge the records of a run into results.jsonl, summary.csv, report.md and a terminal table."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from typing import Any

from . import stats
from .store import Store
from .worker.catalog import AXIS_DEFAULTS

AXIS_KEYS = tuple(AXIS_DEFAULTS)
# Worst first: the status shown for a cell whose repeats disagree.
STATUS_ORDER = ("crashed", "timeout", "oom", "failed", "not_applicable", "ok")


def _median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _max(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def row_label(record: dict[str, Any]) -> str:
    extras = [f"{k}={record[k]}" for k in AXIS_KEYS
              if k != "size" and record.get(k) != AXIS_DEFAULTS[k]]
    return f"{record['workload']} ({record['task']})" + (f" [{', '.join(extras)}]" if extras else "")


def cell_summaries(records: list[dict[str, Any]],
                   cell_order: list[str] | None = None) -> list[dict[str, Any]]:
    """One summary per cell, its repeats pooled; in plan order (the manifest's cell list)."""
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
            items_per_step=first.get("items_per_step"),
            flops_per_step=first.get("flops_per_step"),
            rss_initial_mb=_median([r.get("rss_initial_mb") for r in ok]),
            rss_peak_mb=_max([r.get("rss_peak_mb") for r in ok]),
            vram_initial_mb=_median([r.get("vram_initial_mb") for r in ok]),
            vram_peak_mb=_max([r.get("vram_peak_mb") for r in ok]),
            nvml_memory_peak_mb=_max([r.get("nvml_memory_peak_mb") for r in ok]),
            gpu_energy_j=_median([r.get("gpu_energy_j") for r in ok]),
            gpu_power_mean_w=_median([r.get("gpu_power_mean_w") for r in ok]),
            cpu_util_mean=_median([r.get("cpu_util_mean") for r in ok]),
            loss_first=_median([r.get("loss_first") for r in ok]),
            loss_last=_median([r.get("loss_last") for r in ok]),
            accuracy=_median([r.get("accuracy") for r in ok]),
        )
        summary.update(stats.throughput({**summary, "median_ms": summary["median_ms"]}))
        out.append(summary)
    return out


CSV_COLUMNS = ("cell_id", "cell_name", "environment", "api", "backend", "workload", "task",
               "batch_size", *AXIS_KEYS, "status", "repeats", "repeats_ok", "median_ms", "mean_ms",
               "p10_ms", "p90_ms", "min_ms", "max_ms", "stdev_ms", "cv_repeats", "compile_s",
               "train_s", "items_per_s", "achieved_tflops", "rss_initial_mb", "rss_peak_mb",
               "vram_initial_mb", "vram_peak_mb", "nvml_memory_peak_mb", "gpu_energy_j",
               "gpu_power_mean_w", "cpu_util_mean", "loss_first", "loss_last", "accuracy", "error")


def summary_csv(summaries: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for summary in summaries:
        row = dict(summary)
        if row.get("error"):
            row["error"] = row["error"].splitlines()[0][:300]
        writer.writerow(row)
    return buffer.getvalue()


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
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


def markdown_table(summaries: list[dict[str, Any]], key: str, lower_is_better: bool = True,
                   bold_best: bool = True) -> str:
    environments, rows, grid = pivot(summaries)
    lines = ["| Workload (task) | Batch size | " + " | ".join(environments) + " |",
             "|---|---:|" + "---:|" * len(environments)]
    for label, batch in rows:
        values = [grid[(label, batch, e)].get(key) for e in environments
                  if (label, batch, e) in grid and grid[(label, batch, e)]["status"] == "ok"]
        values = [v for v in values if v is not None]
        best = (min(values) if lower_is_better else max(values)) if values and bold_best else None
        cells = [_cell_text(grid.get((label, batch, e)), key, best) for e in environments]
        lines.append(f"| {label} | {batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_markdown(manifest: dict[str, Any], summaries: list[dict[str, Any]]) -> str:
    parts = [f"# Benchmark report: {manifest.get('name')}", ""]
    host = manifest.get("host", {})
    parts.append(f"Run `{manifest.get('run_id')}` · profile **{manifest.get('profile')}** "
                 f"({manifest.get('profile_reason')}) · executor {manifest.get('executor')} · "
                 f"{manifest.get('started_at')} · CPU {host.get('cpu_model', '?')} "
                 f"× {host.get('cpu_count', '?')} · GPU {host.get('gpu_name') or 'none'}")
    parts += ["", "## Median time per step (ms, lower is better; best in bold)", "",
              markdown_table(summaries, "median_ms"), ""]
    parts += ["Each value is the median of every timed step of every repeat (each repeat a fresh "
              "process); warm-up steps, the first of which includes compilation, are excluded. "
              "NA: the combination does not exist in that environment.", ""]
    parts += ["## Peak memory", "", "Process RSS peak (MB):", "",
              markdown_table(summaries, "rss_peak_mb", bold_best=False), ""]
    if any(s.get("vram_peak_mb") is not None for s in summaries):
        parts += ["Framework-native device memory peak (MB):", "",
                  markdown_table(summaries, "vram_peak_mb", bold_best=False), ""]
    if any(s.get("gpu_energy_j") is not None for s in summaries):
        parts += ["## Energy over the timed window (J, NVML)", "",
                  markdown_table(summaries, "gpu_energy_j"), ""]
    parts += ["## Cells", "",
              "| Cell | Status | Repeats ok | Median ms | p10–p90 ms | CV of repeat medians | "
              "Compile s | Items/s | TFLOP/s | Loss first → last | Accuracy |",
              "|---|---|---:|---:|---|---:|---:|---:|---:|---|---:|"]
    for s in summaries:
        spread = f"{_fmt(s['p10_ms'])}–{_fmt(s['p90_ms'])}" if s["median_ms"] is not None else "–"
        cv = f"{s['cv_repeats'] * 100:.1f} %" if s.get("cv_repeats") is not None else "–"
        loss = (f"{_fmt(s['loss_first'], 3)} → {_fmt(s['loss_last'], 3)}"
                if s.get("loss_first") is not None else "–")
        acc = f"{s['accuracy']:.3f}" if s.get("accuracy") is not None else "–"
        parts.append(f"| `{s['cell_name']}` | {s['status']} | {s['repeats_ok']}/{s['repeats']} | "
                     f"{_fmt(s['median_ms'])} | {spread} | {cv} | {_fmt(s['compile_s'])} | "
                     f"{_fmt(s['items_per_s'])} | {_fmt(s['achieved_tflops'], 4)} | {loss} | {acc} |")
    problems = [s for s in summaries if s["status"] not in ("ok", "not_applicable")]
    if problems:
        parts += ["", "## Problems", ""]
        for s in problems:
            first = (s.get("error") or "").strip().splitlines()
            parts.append(f"- `{s['cell_name']}`: **{s['status']}** — {first[-1] if first else ''}")
    return "\n".join(parts) + "\n"


def terminal_table(summaries: list[dict[str, Any]], title: str):
    """A rich table of median ms/step, rows × environments."""
    from rich.table import Table

    environments, rows, grid = pivot(summaries)
    table = Table(title=title, title_justify="left")
    table.add_column("Workload (task)")
    table.add_column("Batch", justify="right")
    for env in environments:
        table.add_column(env, justify="right")
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
            cells.append(text)
        table.add_row(label, str(batch), *cells)
    table.caption = "median ms/step over all repeats; best in green; NA = not applicable"
    return table


def write_reports(store: Store, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Rewrite every merged output of a run from its cell records (idempotent)."""
    records = store.records()
    summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])])
    store.write_text("results.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    store.write_text("summary.csv", summary_csv(summaries))
    store.write_text("report.md", report_markdown(manifest, summaries))
    return summaries
