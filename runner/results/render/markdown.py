"""report.md: the findings in words first (their answer, then the rest by kind, then the
method), then the Keras-3-benchmarks table, the effects (ratios with intervals, the forest plot),
the answer check, warnings, training, memory, energy, per-cell statistics, the measured peak,
problems and plots — a tuple of sections (SECTIONS), each a function of the Report; the parts
that stand on their own are in markdown_parts.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..analysis.report_model import (ANSWER_MARK, ANSWER_NOTE, TF32_MARK, TF32_NOTE, TIME_KEY,
                                     ReportModel, TableView, first_token_lines,
                                     keras_over_native_lines, ratio_cell)
from ..data.types import CellSummary
from ..formatting import (best_text, cell_text, comparable_values, fmt, md_code, md_text,
                          peak_notes, percent)
from .markdown_cost import cost_section
from .markdown_layers import layers_section
from .markdown_parts import (ABOVE_IDLE, CELLS_NOTE, _ci_text, _sanity, _tf32_text,
                             allocator_lines, answers_section, effects_section, no_interval_note,
                             ratio_text, tf32_section, training_table,
                             warnings_section)
from .markdown_profiles import profiles_section
from .markdown_quantized import quantized_section
from .markdown_reference import peak_section, published_section
from .markdown_scaling import scaling_part
from .markdown_tiers import tiers_section

__all__ = ["SECTIONS", "Report", "effects_section", "markdown_table", "no_interval_note",
           "ratio_text", "report_markdown"]


def markdown_table(view: TableView, key: str, lower_is_better: bool = True,
                   bold_best: bool = True, keras_columns: bool = False) -> str:
    """Rows × environments of one summary key (the view's columns, headed by its titles). With
    keras_columns (and both Keras 3 and Keras 2 environments in the run), two more columns: the
    best Keras 3 backend and its speedup over Keras 2, computed on median ms/step whatever `key`
    is; then the view's native columns."""
    environments, rows, grid, titles = view.environments, view.rows, view.grid, view.titles
    speedups = view.speedups if keras_columns else {}
    natives = view.natives if keras_columns else []
    costs, marked = view.native_ratios, view.tf32_rows
    extra_head = " Best Keras 3 | Speedup of best Keras 3 over Keras 2 |" if speedups else ""
    extra_head += "".join(f" Best Keras 3 ÷ {title} |" for title in natives)
    heads = [md_text(titles.get(e, e)) for e in environments]
    lines = ["| Workload (task) | Batch size | " + " | ".join(heads) + " |" + extra_head,
             "|---|---:|" + "---:|" * len(environments) + ("---:|---:|" if speedups else "")
             + "---:|" * len(natives)]
    for label, batch in rows:
        values = comparable_values((grid.get((label, batch, e)) for e in environments), key)
        best = best_text(values, lower_is_better) if bold_best else None
        cells = [cell_text(grid.get((label, batch, e)), key, best) for e in environments]
        if speedups:
            entry = speedups.get((label, batch))
            cells.append(f"{fmt(entry['best_ms'])} ({md_text(entry['best_backend'])})"
                         if entry else "–")
            cells.append(ratio_text(entry["estimate"])
                         + (f" {TF32_MARK}" if entry["tf32_mixed"] else "")
                         if entry and entry["speedup"] else "–")
        cells += [ratio_cell(costs[(label, batch)][title])
                  if title in costs.get((label, batch), {}) else "–" for title in natives]
        mark = f" {TF32_MARK}" if (label, batch) in marked else ""
        lines.append(f"| {md_text(label)}{mark} | {batch} | " + " | ".join(cells) + " |")
    notes = [TF32_NOTE] if marked else []
    missing = no_interval_note([e["estimate"] for e in speedups.values() if e.get("estimate")])
    if missing:
        notes.append("Speedups " + missing[1][0].lower() + missing[1][1:])
    if any(s.get("answer_differs") for s in grid.values()):
        notes.append(ANSWER_NOTE)
    return "\n".join(lines) + "".join(f"\n\n{note}" for note in notes)


@dataclass(frozen=True)
class Report:
    """What every section of the report reads: the report model and the plots drawn of it."""

    model: ReportModel
    plots: list[Any] | None


def title_section(r: Report) -> list[str]:
    manifest = r.model.manifest
    host = manifest.get("host", {})
    return [f"# Benchmark report: {md_text(manifest.get('name'))}", "",
            f"Run {md_code(manifest.get('run_id'))} · profile "
            f"**{md_text(manifest.get('profile'))}** ({md_text(manifest.get('profile_reason'))})"
            f" · executor {md_text(manifest.get('executor'))} · "
            f"{md_text(manifest.get('started_at'))} · CPU {md_text(host.get('cpu_model', '?'))} "
            f"× {md_text(host.get('cpu_count', '?'))} · GPU {md_text(host.get('gpu_name') or 'none')}"
            + (f" · runner {md_code(manifest['runner_version'])}"
               if manifest.get("runner_version") else "")]


def method_section(r: Report) -> list[str]:
    """How the numbers were made: after the findings, which the report opens with."""
    return ["", "### Method", "", r.model.method] if r.model.summaries else []


def findings_section(r: Report) -> list[str]:
    """The answer first (which is fastest here, by how much, can this run tell), then the rest
    by kind, each kind under its own heading."""
    said = r.model.findings
    if not said:
        return []
    out = ["", "## Findings", "", *[f"- {sentence}" for sentence in said.answer]]
    for kind, sentences in said.groups:
        out += ["", f"### {md_text(kind)}", "", *[f"- {sentence}" for sentence in sentences]]
    return out


def keras_table_section(r: Report) -> list[str]:
    view = r.model.keras_table
    if view is None:
        return []
    return ["", "## The Keras 3 benchmark table (ms/step, geometric mean of the repeat medians, "
            "lower is better; best in bold)", "", markdown_table(view, TIME_KEY,
                                                                  keras_columns=True), "",
            "Rows in the matrix's order (the study's Table 2); Keras 2's Stable Diffusion is "
            "keras-cv's v1.4 and Keras 3's is keras-hub's SD3: a different model, so that "
            "row's speedup compares models, not frameworks."
            + (" HF PyTorch: the same models on Hugging Face's code (transformers, diffusers, "
               "peft) on native PyTorch, eager and torch.compile'd. Best Keras 3: the row's "
               "fastest Keras 3 cell, its backend named; best Keras 3 ÷ HF: how many times "
               "longer the fastest Keras 3 cell that ran its float32 matmuls and convolutions "
               "as the HF cell did (TF32 or full float32) takes, its backend named in the cell "
               "— another backend than the Best Keras 3 column's where TF32 narrowed it (Keras "
               "over native, see Effects)." if view.natives else ""), ""]


def time_section(r: Report) -> list[str]:
    out = ["", "## Time per step (ms, geometric mean of the repeat medians; lower is better; "
           "best in bold)", "", markdown_table(r.model.cells_table, TIME_KEY,
                                               keras_columns=not r.model.keras),
           ""]
    out += ["Each value is the geometric mean of the repeat medians: each repeat (a fresh "
            "process) is summarised by the median of its timed steps, and the cell by the "
            "geometric mean of those, so every repeat weighs the same; it is the estimator of "
            "every ratio and interval too, so a bold value and its ratios never disagree. "
            "Warm-up steps, the first of which includes compilation, are excluded. Bold: the "
            "best of a row whose values differ as printed (ties as printed are all bold). NA: "
            "the combination does not exist in that environment.", ""]
    if r.model.speedups:
        out += ["Best Keras 3: the fastest Keras 3 backend of the row (its backend in brackets); "
                "speedup: Keras 2 (tf-keras) ms/step divided by that, above 1 when Keras 3 is "
                "faster, with its 95 % interval (an environment effect, see Effects).", ""]
    return out


def effects_part(r: Report) -> list[str]:
    analysis = r.model.analysis
    out = effects_section(analysis, r.plots) if analysis is not None else []
    costs = keras_over_native_lines(r.model.native)
    if costs and not out:
        out = ["## Effects", ""]
    return out + costs


def first_token_part(r: Report) -> list[str]:
    return first_token_lines(r.model.summaries, r.model.column_titles)


def answers_part(r: Report) -> list[str]:
    return answers_section(r.model.summaries)


def warnings_part(r: Report) -> list[str]:
    return warnings_section(r.model.manifest, r.model.summaries)


def left_out_section(r: Report) -> list[str]:
    """The run's record files the report could not use: changed since the runner wrote them
    (its ledger), not valid, or not of a cell of the run; and the ledger itself when it cannot
    vouch for any (deleted, unreadable, or a run made before it)."""
    out = [] if not r.model.ledger_fault else [
        "## Records unverified", "", f"{md_code('ledger.jsonl')}: {md_text(r.model.ledger_fault)}"
        ": this report's records are read unverified (the ledger is what tells a record the "
        "runner wrote from one changed since).", ""]
    if not r.model.left_out:
        return out
    return out + ["## Records left out", "", "These files in the run folder are not in this "
                  "report (a resume sets them aside and measures their cells again):", "",
                  *[f"- {md_code(name)}: {md_text(why)}" for name, why in r.model.left_out], ""]


def fixed_costs_section(r: Report) -> list[str]:
    costs = r.model.fixed_costs
    if not costs:
        return []
    out = ["## Where a process's time goes (s, medians per environment)", "",
           "| Environment | Cells | Import | Setup | Warm-up | Other | Fixed cost | Timed |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {md_text(c['environment'])} | {c['cells']} | {fmt(c['import_s'])} | "
            f"{fmt(c['setup_s'])} | {fmt(c['warmup_s'])} | {fmt(c['other_s'])} | "
            f"{fmt(c['fixed_s'])} | {fmt(c['timed_s'])} |" for c in costs]
    return out + ["", "Fixed cost: the worker process's wall time minus its timed window (import "
                  "of the framework, building the model and data, warm-up with compilation, and "
                  "the rest: interpreter start, block calibration, telemetry, writing the result).",
                  ""]


def training_section(r: Report) -> list[str]:
    training = training_table(r.model.cells_table)
    if not training:
        return []
    return ["## Training", "", training, "",
            "Epoch s, measured: the timed window's whole epochs, each with its epoch-end work "
            "(iterator, reshuffle, callbacks), their time divided by their count (– where the "
            "window held no whole epoch); step × steps: the steady-state median step times the "
            "steps of one epoch (an estimate without the epoch's own work); train s: the timed "
            "loop; medians over repeats, peaks the largest repeat.", ""]


def memory_section(r: Report) -> list[str]:
    summaries, view = r.model.summaries, r.model.cells_table
    out = ["## Peak memory", "", "Process RSS peak (MB):", "",
           markdown_table(view, "rss_peak_mb", bold_best=False), ""]
    if any(s.get("vram_peak_mb") is not None for s in summaries):
        out += ["Framework-native device memory peak (MB):", "",
                markdown_table(view, "vram_peak_mb", bold_best=False), ""]
    if any(s.get("nvml_memory_peak_mb") is not None for s in summaries):
        out += ["NVML device memory used, peak (MB): the whole device, including what an "
                "allocator reserved or preallocated, so read it with the settings below:", "",
                markdown_table(view, "nvml_memory_peak_mb", bold_best=False), "",
                "Allocator settings in force (unset: the framework's default):", "",
                *allocator_lines(summaries), ""]
    return out


def energy_section(r: Report) -> list[str]:
    summaries, view = r.model.summaries, r.model.cells_table
    if not any(s.get("energy_per_step_j") is not None or s.get("energy_note") for s in summaries):
        return []
    out = ["## Energy per step (J, NVML; lower is better)", "",
           markdown_table(view, "energy_per_step_j"), "",
           "The NVML total-energy counter's delta over the timed window divided by the "
           "steps in it (per item: also by the batch); – where the window was shorter than "
           "20 of the counter's update intervals (measured at rest; 0.1 s assumed where it "
           "was not), never 0.", ""]
    if any(s.get("energy_per_step_above_idle_j") is not None for s in summaries):
        out += [ABOVE_IDLE, "",
                markdown_table(view, "energy_per_step_above_idle_j"), "",
                "Power at rest (W): " + ", ".join(
                    f"{md_code(s['cell_name'])} {fmt(s['gpu_idle_power_w'])}" for s in summaries
                    if s.get("gpu_idle_power_w") is not None) + ".", ""]
    out += [f"- {md_code(s['cell_name'])}: {md_text(s['energy_note'])}" for s in summaries
            if s.get("energy_note")]
    return out + [""]


def _cell_row(s: CellSummary) -> str:
    spread = f"{fmt(s['p10_ms'])}–{fmt(s['p90_ms'])}" if s["median_ms"] is not None else "–"
    block = s.get("calls_per_sample") or 1
    spread += f" (blocks of {block} calls)" if block > 1 and s["median_ms"] is not None else ""
    cv, cv_repeats = percent(s.get("cv")), percent(s.get("cv_repeats"))
    loss, acc = _sanity(s)
    mark = f" {ANSWER_MARK}" if s.get("answer_differs") else ""
    return (f"| {md_code(s['cell_name'], in_table=True)}{mark} | {md_text(s['status'])} | "
            f"{s['repeats_ok']}/{s['repeats']} | "
            f"{fmt(s.get(TIME_KEY))} | {fmt(s['median_ms'])} | {_ci_text(s)} | "
            f"{percent(s.get('detectable_change'))} | "
            f"{fmt(s.get('iqr_ms'))} | "
            f"{spread} | {cv} | {cv_repeats} | {fmt(s['compile_s'])} | "
            f"{fmt(s['items_per_s'])} | {fmt(s['achieved_tflops'], 4)} | "
            f"{_tf32_text(s)} | {percent(s.get('fraction_of_peak'), over=True)} | {loss} | {acc} |")


def cells_section(r: Report) -> list[str]:
    out = ["## Cells", "",
           "| Cell | Status | Repeats ok | Time ms | Median ms | 95 % CI (across repeats) | "
           "Detectable change | IQR ms | p10–p90 ms | "
           "CV | CV of repeat medians | Compile s | Items/s | TFLOP/s | TF32 | % of peak | "
           "Loss first → last | Accuracy |",
           "|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    out += [_cell_row(s) for s in r.model.summaries]
    return out + ["", CELLS_NOTE, ""] + peak_notes(r.model.summaries)


def tf32_part(r: Report) -> list[str]:
    return tf32_section(r.model.summaries)


def published_part(r: Report) -> list[str]:
    return published_section(r.model.published)


def peak_part(r: Report) -> list[str]:
    return peak_section(r.model.manifest)


def problems_section(r: Report) -> list[str]:
    problems = [s for s in r.model.summaries if s["status"] not in ("ok", "not_applicable")]
    if not problems:
        return []
    out = ["## Problems", ""]
    for s in problems:
        first = (s.get("error") or "").strip().splitlines()
        out.append(f"- {md_code(s['cell_name'])}: **{md_text(s['status'])}** — "
                   f"{md_text(first[-1]) if first else ''}")
    return out + [""]


def profiles_part(r: Report) -> list[str]:
    return profiles_section(r.model.profiled)


def plots_section(r: Report) -> list[str]:
    return plots_lines(r.plots, r.model.analysis is not None)


def plots_lines(plots: list[Any] | None, effects_drawn: bool) -> list[str]:
    """The plots at the report's end (the forest plot is drawn with the effects)."""
    if not plots:
        return []
    out = ["## Plots", ""]
    for plot in plots:
        if effects_drawn and plot.path and plot.path.endswith("effects.png") or \
                plot.path and plot.path.startswith("plots/scaling-"):    # shown in Scaling
            continue
        out += [f"![{plot.title}]({plot.path})" if plot.path
                else f"{plot.title}: skipped, {plot.note}.", ""]
    return out


# The report, section by section, in order (each returns its lines, none when it has nothing).
SECTIONS: tuple[Callable[[Report], list[str]], ...] = (
    title_section, findings_section, method_section, keras_table_section, time_section,
    lambda r: layers_section(r.model.layers),
    lambda r: cost_section(r.model), lambda r: tiers_section(r.model.tiers), effects_part,
    scaling_part,
    lambda r: quantized_section(r.model.quantized), answers_part, warnings_part, left_out_section,
    fixed_costs_section, training_section,
    first_token_part, memory_section,
    energy_section, cells_section, tf32_part, published_part, peak_part,
    problems_section, profiles_part, plots_section)


def report_markdown(model: ReportModel, plots: list[Any] | None = None) -> str:
    """The Markdown report of `model` (analysis/report_model.py); `plots` (runner.plots.Plot: a
    path relative to the run folder, or a note on why it was skipped) are listed at the end, the
    forest plot with the effects."""
    report = Report(model, plots)
    return "\n".join(line for section in SECTIONS for line in section(report))
