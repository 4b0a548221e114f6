"""report.md: the findings in words first, then the Keras-3-benchmarks table, the effects (ratios
with intervals, the forest plot), the answer check, warnings, training, memory, energy, per-cell
statistics, the measured peak, problems and plots."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from . import answers, conditions, findings, reference, stats
from .effects import ENVIRONMENT, Analysis, EffectTable, keras_speedups, shown
from .formatting import best_text, cell_text, comparable_values, fmt, percent
from .summaries import TF32_MARK, TF32_NOTE, fixed_costs, keras_view, pivot, tf32_rows
from .types import CellSummary, Manifest


def allocator_lines(summaries: list[CellSummary]) -> list[str]:
    """One line per environment: its allocator settings (every distinct set, should cells differ)."""
    seen: dict[str, list[str]] = defaultdict(list)
    for s in summaries:
        allocator = s.get("allocator")
        if allocator is None:  # no ok repeat: nothing ran
            continue
        shown = ", ".join(f"{k}={v}" for k, v in sorted(allocator.items()))
        if shown not in seen[s["environment"]]:
            seen[s["environment"]].append(shown)
    return [f"- `{env}`: " + ("; ".join(sets) if any(sets) else "not recorded")
            for env, sets in seen.items()]


def markdown_table(summaries: list[CellSummary], key: str, lower_is_better: bool = True,
                   bold_best: bool = True, keras_columns: bool = False,
                   columns: list[str] | None = None, titles: dict[str, str] | None = None) -> str:
    """Rows × environments of one summary key (columns in `columns` order, headed by `titles`
    where given). With keras_columns (and both Keras 3 and Keras 2 environments in the run), two
    more columns: the best Keras 3 backend and its speedup over Keras 2, computed on median
    ms/step whatever `key` is."""
    environments, rows, grid = pivot(summaries)
    environments = columns or environments
    speedups = keras_speedups(summaries) if keras_columns else {}
    marked = tf32_rows(summaries)
    extra_head = " Best Keras 3 | Speedup of best Keras 3 over Keras 2 |" if speedups else ""
    heads = [(titles or {}).get(e, e) for e in environments]
    lines = ["| Workload (task) | Batch size | " + " | ".join(heads) + " |" + extra_head,
             "|---|---:|" + "---:|" * len(environments) + ("---:|---:|" if speedups else "")]
    for label, batch in rows:
        values = comparable_values((grid.get((label, batch, e)) for e in environments), key)
        best = best_text(values, lower_is_better) if bold_best else None
        cells = [cell_text(grid.get((label, batch, e)), key, best) for e in environments]
        if speedups:
            entry = speedups.get((label, batch))
            cells.append(f"{fmt(entry['best_ms'])} ({entry['best_backend']})" if entry else "–")
            cells.append(ratio_text(entry["estimate"]) if entry and entry["speedup"] else "–")
        mark = f" {TF32_MARK}" if (label, batch) in marked else ""
        lines.append(f"| {label}{mark} | {batch} | " + " | ".join(cells) + " |")
    notes = [TF32_NOTE] if marked else []
    missing = no_interval_note([e["estimate"] for e in speedups.values() if e.get("estimate")])
    if missing:
        notes.append("Speedups " + missing[1][0].lower() + missing[1][1:])
    if any(s.get("answer_differs") for s in grid.values()):
        notes.append(answers.NOTE)
    return "\n".join(lines) + "".join(f"\n\n{note}" for note in notes)


def ratio_text(estimate: stats.Ratio) -> str:
    """'8.10× (7.60–8.60)', '1.30× (no interval)' (no_interval_note says why), or '– (why)'."""
    if estimate.ratio is None:
        return f"– ({estimate.why})"
    if not estimate.has_interval:
        return f"{fmt(estimate.ratio)}× (no interval)"          # why: below the table
    return f"{fmt(estimate.ratio)}× ({fmt(estimate.low)}–{fmt(estimate.high)})"


def effect_table(table: EffectTable) -> list[str]:
    """One factor's effects: rows (workload and settings, batch, environment) × its values, then
    the geometric mean of each column."""
    axis = table.factor != ENVIRONMENT
    keyed: dict[tuple[Any, ...], dict[str, str]] = {}
    for effect in table.effects:
        row = (effect.label, *(() if table.factor == "batch_size" else (effect.batch_size,)),
               *((effect.environment,) if axis else ()))
        text = ratio_text(effect.estimate) + (f" {answers.MARK}" if effect.differs else "")
        keyed.setdefault(row, {})[repr(effect.value)] = text
    heads = (["Workload (task) and settings"]
             + ([] if table.factor == "batch_size" else ["Batch size"])
             + (["Environment"] if axis else []))
    columns = [shown(v) if axis else str(v) for v in table.values]
    if axis:
        columns = [f"{table.factor} = {c}" for c in columns]
    lines = ["| " + " | ".join(heads + columns) + " |",
             "|---|" + "---:|" * (table.factor != "batch_size") + "---|" * axis
             + "---:|" * len(columns)]
    for row, cells in keyed.items():
        lines.append("| " + " | ".join([str(part) for part in row]
                                       + [cells.get(repr(v), "") for v in table.values]) + " |")
    means = []
    for value in table.values:
        overall, rows = table.overall(value)
        means.append(f"{ratio_text(overall)} over {rows} row{'s' if rows > 1 else ''}"
                     if overall.ratio is not None else "–")
    lines.append("| **Geometric mean** | " + " | ".join([""] * (len(heads) - 1) + means) + " |")
    return lines + no_interval_note([e.estimate for e in table.effects])


def no_interval_note(estimates: list[stats.Ratio]) -> list[str]:
    """Why ratios have no interval, once under their table."""
    reasons = list(dict.fromkeys(e.why for e in estimates if e.ratio is not None
                                 and not e.has_interval))
    return ["", "With no interval: " + "; ".join(r or "" for r in reasons) + "."] if reasons else []


def effects_section(analysis: Analysis, plots: list[Any] | None) -> list[str]:
    if not analysis.tables:
        return []
    parts = ["## Effects", "",
             "Each ratio is a speedup: the baseline's time ÷ this cell's time, both the "
             "geometric mean of the cell's repeat medians (above 1: faster than the baseline, "
             "below 1: slower). In brackets its 95 % interval: a Welch t interval on the "
             "logarithms of the two cells' repeat medians (each repeat, a fresh process, is one "
             "observation; 3 repeats per cell are needed). An interval that covers 1 is not "
             "distinguishable from noise. The geometric mean of a column spans its rows whose "
             "cells computed the same answer, with the interval of that mean from each row's "
             "own. Baselines: the first value in the matrix, or `[report] baselines = { jit = "
             "false, ... }`; environments against `[report] baseline_environment` (default: "
             "the first environment).", ""]
    forest = next((p for p in plots or [] if p.path and p.path.endswith("effects.png")), None)
    if forest:
        parts += [f"![{forest.title}]({forest.path})", ""]
    for table in analysis.tables:
        parts += [f"### {table.title}", "", *effect_table(table), ""]
        if table.without_baseline:
            parts += [f"{table.without_baseline} group(s) have no cell at {table.factor} = "
                      f"{shown(table.baseline)} (the configured baseline) and are left out.", ""]
    return parts


def answers_section(summaries: list[CellSummary]) -> list[str]:
    ok = [s for s in summaries if s["status"] == "ok"]
    if not ok:
        return []
    counts = {status: sum(1 for s in ok if s.get("answer_check") == status)
              for status in (answers.SAME, answers.DIFFERENT, answers.NO_MAJORITY, answers.ALONE,
                             answers.NOT_RECORDED, answers.UNCHECKED)}
    parts = ["## Different answers", "",
             "Every cell records a small fingerprint of what it computed on the seeded inputs "
             "(norms of the output, the initial loss and logits, the first step's loss, the "
             "first generated tokens), and the cells of a row are compared quantity by quantity "
             "with a relative tolerance set by their arithmetic: float32 "
             f"{answers.TOLERANCES['float32']:g}, TF32 and float16 "
             f"{answers.TOLERANCES['tf32']:g}, bfloat16 {answers.TOLERANCES['bfloat16']:g}. "
             "The row's majority is the reference.", "",
             "Cells: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n) + ".", ""]
    differing = [s for s in ok if s.get("answer_differs")]
    if differing:
        parts += [f"- `{s['cell_name']}` ({s['answer_check']}, against "
                  f"{s.get('answer_reference') or 'the row'}): {s.get('answer_detail')}"
                  for s in differing] + [""]
    else:
        parts += ["No cell computed a different answer.", ""]
    unchecked = [s for s in ok if s.get("answer_check") == answers.UNCHECKED]
    if unchecked:
        parts += ["Not checked (the matrix sets `check_answers = false` on their benchmark): "
                  + ", ".join(f"`{s['cell_name']}`" for s in unchecked) + ".", ""]
    alone = [s for s in ok if s.get("answer_check") == answers.ALONE]
    if alone:
        parts += ["Alone in their row, nothing to compare with (Keras 2's keras-hub cells are "
                  "compared with Keras 2 cells only): "
                  + ", ".join(f"`{s['cell_name']}`" for s in alone) + ".", ""]
    missing = [s for s in ok if s.get("answer_check") == answers.NOT_RECORDED]
    if missing:
        unknown = "no fingerprint: a run made before answers were recorded, or a workload without one"
        parts += ["No answer recorded: " + ", ".join(
            f"`{s['cell_name']}` ({s.get('answer_note') or unknown})" for s in missing) + ".", ""]
    return parts


def _pair(first: float | None, second: float | None) -> str:
    return "–" if first is None and second is None else f"{fmt(first)} / {fmt(second)}"


def training_table(summaries: list[CellSummary]) -> str | None:
    """One line per fit cell (rows in matrix order, environments in column order)."""
    fits = [s for s in summaries if s["task"] == "fit" and s["status"] != "not_applicable"]
    if not fits:
        return None
    environments, rows, _ = pivot(summaries)
    fits.sort(key=lambda s: (rows.index((s["label"], s["batch_size"])),
                             environments.index(s["environment"])))
    marked = tf32_rows(summaries)
    lines = ["| Workload (task) | Batch size | Environment | Epoch s | Train s (timed) | Accuracy | "
             "Loss first → last | RSS initial / peak MB | VRAM initial / peak MB |",
             "|---|---:|---|---:|---:|---:|---|---:|---:|"]
    for s in fits:
        label = s["label"] + (f" {TF32_MARK}" if (s["label"], s["batch_size"]) in marked else "")
        label += f" {answers.MARK}" if s.get("answer_differs") else ""
        if s["status"] != "ok":
            lines.append(f"| {label} | {s['batch_size']} | {s['environment']} | {s['status']} "
                         "| | | | | |")
            continue
        loss, acc = _sanity(s)
        lines.append(f"| {label} | {s['batch_size']} | {s['environment']} | "
                     f"{fmt(s.get('epoch_s'))} | {fmt(s.get('train_s'))} | {acc} | {loss} | "
                     f"{_pair(s.get('rss_initial_mb'), s.get('rss_peak_mb'))} | "
                     f"{_pair(s.get('vram_initial_mb'), s.get('vram_peak_mb'))} |")
    return "\n".join(lines) + (f"\n\n{TF32_NOTE}" if marked else "")


def _sanity(s: Mapping[str, Any]) -> tuple[str, str]:
    """'loss first → last' and accuracy, or '–' where the cell has none."""
    loss = (f"{fmt(s['loss_first'])} → {fmt(s['loss_last'])}"
            if s.get("loss_first") is not None else "–")
    return loss, fmt(s["accuracy"])


def _tf32_text(s: Mapping[str, Any]) -> str:
    if s["status"] != "ok":
        return "–"
    words: dict[Any, str] = {True: "on", False: "off"}
    return words.get(s.get("tf32_effective"), "not recorded")


def tf32_section(summaries: list[CellSummary]) -> list[str]:
    """Which GPU cells ran their float32 matmuls on TF32 tensor cores, which did not, and which
    do not say (empty for a run without GPU cells: a CPU has no TF32)."""
    gpu = [s for s in summaries if s["status"] == "ok" and s.get("on_gpu")]
    if not gpu:
        return []
    lines = ["## TF32", "",
             "Whether each GPU cell's float32 matmuls and convolutions ran on TF32 tensor cores "
             "(10-bit mantissa, a different peak from float32), as its worker recorded it from the "
             "framework (`effective.tf32`):", ""]
    for state, title in ((True, "TF32 on"), (False, "TF32 off"), (None, "not recorded")):
        cells = [s for s in gpu if s.get("tf32_effective") is state]
        if cells:
            lines.append(f"- {title}: " + ", ".join(
                f"`{s['cell_name']}`" + (f" ({s['tf32_detail']})" if s.get("tf32_detail") else "")
                for s in cells))
    return lines + [""]


def machine_lines(manifest: Manifest) -> list[str]:
    """The run's machine: its profile (or the lack of one) and locked clocks."""
    lines = []
    profile = manifest.get("machine_profile") or {}
    if profile and not profile.get("found") and profile.get("key"):
        lines.append(f"{profile.get('why')}: compare keeps its fixed threshold and clocks are "
                     "judged against 5 %; measure this machine's noise with `python -m runner "
                     "doctor --measure MATRIX`")
    clocks = manifest.get("gpu_clocks")
    if clocks:
        setting = "the TDP (base) clock" if clocks.get("setting") == "tdp" else \
            f"{clocks.get('setting')} MHz"
        lines.append(f"GPU clocks were locked at {setting} for this run (not comparable with "
                     "unlocked runs)")
    return lines


def warnings_section(manifest: Manifest, summaries: list[CellSummary]) -> list[str]:
    """The warnings, grouped by kind in plain words (conditions.TITLES): the machine, the
    numbers themselves, throttling, other load, clocks, settle."""
    machine = machine_lines(manifest)
    flagged = [s for s in summaries if s.get("warnings")]
    if not flagged and not machine:
        return []
    parts = ["## Warnings", ""]
    if machine:
        parts += ["### This machine", "", *[f"- {line}" for line in machine], ""]
    for kind in ("statistics", *conditions.KINDS):
        cells: list[tuple[CellSummary, list[str]]] = [
            (s, texts) for s in flagged
            if (texts := (s.get("warning_groups") or {"statistics": s["warnings"]}).get(kind))]
        if not cells:
            continue
        parts += [f"### {conditions.TITLES[kind]}", ""]
        if kind == "statistics":
            parts += [f"CV limit {stats.CV_LIMIT * 100:.0f} %, minimum timed window "
                      f"{stats.MIN_WINDOW_S:.0f} s:", ""]
        parts += [f"- `{s['cell_name']}`: " + "; ".join(texts) for s, texts in cells]
        parts.append("")
    return parts


def _ci_text(s: Mapping[str, Any]) -> str:
    if s.get("median_ci_low_ms") is None:
        too_few = 0 < s.get("repeats_ok", 0) < stats.MIN_CI_REPEATS
        return "–, too few repeats" if too_few else "–"
    return f"{fmt(s['median_ci_low_ms'])}–{fmt(s['median_ci_high_ms'])}"


def report_markdown(manifest: Manifest, summaries: list[CellSummary],
                    plots: list[Any] | None = None, analysis: Analysis | None = None) -> str:
    """The Markdown report; `plots` (runner.plots.Plot: a path relative to the run folder, or a
    note on why it was skipped) are listed at the end, the forest plot with the effects."""
    parts = [f"# Benchmark report: {manifest.get('name')}", ""]
    host = manifest.get("host", {})
    parts.append(f"Run `{manifest.get('run_id')}` · profile **{manifest.get('profile')}** "
                 f"({manifest.get('profile_reason')}) · executor {manifest.get('executor')} · "
                 f"{manifest.get('started_at')} · CPU {host.get('cpu_model', '?')} "
                 f"× {host.get('cpu_count', '?')} · GPU {host.get('gpu_name') or 'none'}"
                 + (f" · runner `{manifest['runner_version']}`" if manifest.get("runner_version")
                    else ""))
    keras = keras_view(summaries)
    if analysis is not None:
        said = findings.sentences(summaries, analysis, keras[0] if keras else None)
        if said:
            parts += ["", "## Findings", "", *[f"- {sentence}" for sentence in said]]
    if keras:
        rows, columns, titles = keras
        parts += ["", "## The Keras 3 benchmark table (median ms/step, lower is better; best in "
                  "bold)", "", markdown_table(rows, "median_ms", keras_columns=True,
                                               columns=columns, titles=titles), "",
                  "Rows in the matrix's order (the study's Table 2); Keras 2's Stable Diffusion is "
                  "keras-cv's v1.4 and Keras 3's is keras-hub's SD3: a different model, so that "
                  "row's speedup compares models, not frameworks.", ""]
    parts += ["", "## Median time per step (ms, lower is better; best in bold)", "",
              markdown_table(summaries, "median_ms", keras_columns=not keras), ""]
    parts += ["Each value is the median of the repeat medians: each repeat (a fresh process) is "
              "summarised by the median of its timed steps, and the cell by the median of those, "
              "so every repeat weighs the same; warm-up steps, the first of which includes "
              "compilation, are excluded. Bold: the best of a row whose values differ as printed "
              "(ties as printed are all bold). NA: the combination does not exist in that "
              "environment.", ""]
    if keras_speedups(summaries):
        parts += ["Best Keras 3: the fastest Keras 3 backend of the row (its backend in brackets); "
                  "speedup: Keras 2 (tf-keras) ms/step divided by that, above 1 when Keras 3 is "
                  "faster, with its 95 % interval (an environment effect, see Effects).", ""]
    if analysis is not None:
        parts += effects_section(analysis, plots)
    parts += answers_section(summaries)
    parts += warnings_section(manifest, summaries)
    costs = fixed_costs(summaries)
    if costs:
        parts += ["## Where a process's time goes (s, medians per environment)", "",
                  "| Environment | Cells | Import | Setup | Warm-up | Other | Fixed cost | Timed |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        parts += [f"| {c['environment']} | {c['cells']} | {fmt(c['import_s'])} | "
                  f"{fmt(c['setup_s'])} | {fmt(c['warmup_s'])} | {fmt(c['other_s'])} | "
                  f"{fmt(c['fixed_s'])} | {fmt(c['timed_s'])} |" for c in costs]
        parts += ["", "Fixed cost: the worker process's wall time minus its timed window (import "
                  "of the framework, building the model and data, warm-up with compilation, and "
                  "the rest: interpreter start, block calibration, telemetry, writing the result).",
                  ""]
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
              "| Cell | Status | Repeats ok | Median ms | 95 % CI of median (across repeats) | "
              "IQR ms | p10–p90 ms | "
              "CV | CV of repeat medians | Compile s | Items/s | TFLOP/s | TF32 | % of peak | "
              "Loss first → last | Accuracy |",
              "|---|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    for s in summaries:
        spread = f"{fmt(s['p10_ms'])}–{fmt(s['p90_ms'])}" if s["median_ms"] is not None else "–"
        cv, cv_repeats = percent(s.get("cv")), percent(s.get("cv_repeats"))
        loss, acc = _sanity(s)
        mark = f" {answers.MARK}" if s.get("answer_differs") else ""
        parts.append(f"| `{s['cell_name']}`{mark} | {s['status']} | {s['repeats_ok']}/{s['repeats']} | "
                     f"{fmt(s['median_ms'])} | {_ci_text(s)} | {fmt(s.get('iqr_ms'))} | "
                     f"{spread} | {cv} | {cv_repeats} | {fmt(s['compile_s'])} | "
                     f"{fmt(s['items_per_s'])} | {fmt(s['achieved_tflops'], 4)} | "
                     f"{_tf32_text(s)} | {percent(s.get('fraction_of_peak'))} | {loss} | {acc} |")
    parts += ["", "Median ms: the median of the repeat medians. 95 % CI of the median (across "
              "repeats): computed on the repeat medians, each repeat (a process) one "
              "observation — "
              "a Student-t interval on their logarithms with 3 to 5 repeats, the distribution-free "
              "binomial order-statistic interval from 6; none with fewer than 3 repeats. IQR, "
              "p10–p90 and CV (stdev / mean): each repeat's own, then the median across repeats "
              "(the typical process's step-to-step spread); CV of repeat medians: the spread "
              "between processes. TF32: whether the cell's float32 matmuls ran on TF32 tensor "
              "cores, as recorded (off on a CPU). % of peak: achieved "
              "TFLOP/s over the run's calibration peak for the same device and precision (TF32 "
              "counted apart from float32; none where a GPU cell's TF32 state is not "
              "recorded): dense matmuls at several sizes measured before the "
              "cells, the fastest kept — a measured peak, never a cell of the run and never a "
              "datasheet figure; – without `[run] calibrate = true`.", ""]
    parts += tf32_section(summaries)
    beside = reference.beside(summaries)
    if beside:
        table = reference.published()
        parts += [f"## Beside the published figures ({table['hardware']}, ms/step)", "",
                  "| Workload (task) | Batch size | " + " | ".join(
                      f"{reference.TITLES[c]}: here / published" for c in reference.COLUMNS) + " |",
                  "|---|---:|" + "---:|" * len(reference.COLUMNS)]
        for row in beside:
            cells = []
            for column in reference.COLUMNS:
                c = row["columns"][column]
                published = fmt(c["published_ms"]) if c["published_ms"] else "NA"
                here = fmt(c["measured_ms"]) if c["measured_ms"] is not None else (c["status"] or "–")
                ratio = f" ({fmt(c['ratio'])}×)" if c["ratio"] is not None else ""
                cells.append(f"{here} / {published}{ratio}")
            parts.append(f"| {row['workload']} ({row['task']}) | {row['batch_size']} | "
                         + " | ".join(cells) + " |")
        parts += ["", "Published: the Keras 3 benchmark study's Table 2 "
                  f"(source: {table['source']}). Hardware, versions and weights differ (random "
                  "weights here): read ranks and ratios, not absolute values. The ratio here ÷ "
                  "published is shown only for cells that ran at full size on a GPU.", ""]
    calibration = manifest.get("calibration") or {}
    if calibration.get("peaks"):
        parts += ["## Measured peak", "", "| Device | Precision | TFLOP/s | Environment | n |",
                  "|---|---|---:|---|---:|"]
        parts += [f"| {p['device']} | {p['kind']} | {fmt(p['tflops'], 4)} | {p['environment']} "
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
            if analysis is not None and plot.path and plot.path.endswith("effects.png"):
                continue                    # drawn with the effects
            parts += [f"![{plot.title}]({plot.path})" if plot.path
                      else f"{plot.title}: skipped, {plot.note}.", ""]
    return "\n".join(parts)
