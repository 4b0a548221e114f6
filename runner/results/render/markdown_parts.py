"""The parts of report.md that stand on their own (results/render/markdown.py puts them in order):
the effects' tables, the same-answer check, the warnings, the training table, TF32, allocator
settings and the cells' small texts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ..analysis.report_model import (
    ANSWER_ALONE, ANSWER_DIFFERENT, ANSWER_DIFFERENT_WORK, ANSWER_MARK, ANSWER_NO_MAJORITY,
    ANSWER_NOT_RECORDED, ANSWER_SAME, ANSWER_TOLERANCES, ANSWER_UNCHECKED, BETWEEN_ENVIRONMENTS,
    CONDITION_KINDS, CONDITION_TITLES, CV_LIMIT, MIN_CI_REPEATS, MIN_WINDOW_S, TF32_MARK,
    TF32_NOTE, Analysis, ConditionKind, EffectTable, Ratio, TableView, condition_kind_of, shown)
from ..data.types import CellSummary, Manifest
from ..formatting import fmt, md_code, md_text


# The Cells table's legend (markdown.cells_section).
CELLS_NOTE = ("Time ms: the geometric mean of the repeat medians, what every table, ratio, "
              "items/s and TFLOP/s use. Median ms: the median of the repeat medians (one aberrant"
              " process of three cannot move it). 95 % CI (across repeats): computed on the "
              "repeat medians, each repeat (a process) one observation — with 3 to 5 repeats a "
              "Student-t interval on their logarithms, around their geometric mean (the Time "
              "ms); from 6 the distribution-free binomial order-statistic interval of their "
              "median (the Median ms); none with fewer than 3 repeats. "
              "Detectable change (an estimate): the smallest change against a re-run like this "
              "cell that the ratio test of compare and the effects detects with 80 % power, at "
              "its repeats and the 70 % upper confidence bound of its spread between processes "
              "(a spread measured from a few repeats understates it: plugged in as measured, the "
              "stated change was seen 58.6 % of the time with 3 repeats; 3 repeats at a measured 2 "
              "% spread: 16 %, 5 repeats: 6.5 %). IQR, p10–p90 and CV "
              "(stdev / mean): each repeat's own, then the median across repeats (the typical "
              "process's step-to-step spread; for a cell timed in blocks of k calls, one "
              "synchronisation per block, the spread between blocks, per step); CV of repeat "
              "medians: the spread between processes. TF32: whether the cell's float32 matmuls or"
              " convolutions (the paths its workload uses) ran on TF32 tensor cores, as recorded "
              "(off on a CPU). % of peak, for work bound by dense arithmetic only (none for "
              "elementwise): achieved TFLOP/s over the run's calibration peak for the same device"
              " and precision (TF32 counted apart from float32; none where a GPU cell's TF32 "
              "state is not recorded): dense matmuls timed before the cells, sustained, the size "
              "and environment chosen by one pass and the peak measured by another — never a cell"
              " of the run and never a datasheet figure; – without `[run] calibrate = true`.")


ABOVE_IDLE = ("Above idle: the same, less the device's power at rest over the window (measured "
              "by each repeat before its framework is imported, so no framework's own rest draw "
              "is in it; records made before 2026-11-28 read it with the framework's context "
              "open: a JAX worker's 122 W against torch's 80 W, nothing running 79.8 W on an "
              "H200) — the energy the work itself added:")


def allocator_lines(summaries: list[CellSummary]) -> list[str]:
    """One line per environment: its allocator settings (every distinct set, should cells differ)."""
    seen: dict[str, list[str]] = defaultdict(list)
    for s in summaries:
        allocator = s.get("allocator")
        if allocator is None:  # no ok repeat: nothing ran
            continue
        shown = ", ".join(f"{md_text(k)}={md_text(v)}" for k, v in sorted(allocator.items()))
        if shown not in seen[s["environment"]]:
            seen[s["environment"]].append(shown)
    return [f"- {md_code(env)}: " + ("; ".join(sets) if any(sets) else "not recorded")
            for env, sets in seen.items()]


def ratio_text(estimate: Ratio) -> str:
    """'8.10× (7.60–8.60)', '1.30× (no interval)' (no_interval_note says why), or '– (why)'."""
    if estimate.ratio is None:
        return f"– ({estimate.why})"
    if not estimate.has_interval:
        return f"{fmt(estimate.ratio)}× (no interval)"          # why: below the table
    return f"{fmt(estimate.ratio)}× ({fmt(estimate.low)}–{fmt(estimate.high)})"


def effect_table(table: EffectTable) -> list[str]:
    """One factor's effects: rows (workload and settings, batch, environment) × its values, then
    the geometric mean of each column."""
    axis = table.factor not in BETWEEN_ENVIRONMENTS
    keyed: dict[tuple[Any, ...], dict[str, str]] = {}
    for effect in table.effects:
        row = (effect.label, *(() if table.factor == "batch_size" else (effect.batch_size,)),
               *((effect.environment,) if axis else ()))
        text = ratio_text(effect.estimate) + (f" {ANSWER_MARK}" if effect.differs else "") \
            + (f" {TF32_MARK}" if effect.tf32_mixed else "") \
            + (f" · {md_text(effect.note)}" if effect.note else "")
        keyed.setdefault(row, {})[repr(effect.value)] = text
    heads = (["Workload (task) and settings"]
             + ([] if table.factor == "batch_size" else ["Batch size"])
             + (["Environment"] if axis else []))
    columns = [md_text(shown(v) if axis else str(v)) for v in table.values]
    if axis:
        columns = [f"{md_text(table.factor)} = {c}" for c in columns]
    lines = ["| " + " | ".join(heads + columns) + " |",
             "|---|" + "---:|" * (table.factor != "batch_size") + "---|" * axis
             + "---:|" * len(columns)]
    for row, cells in keyed.items():
        lines.append("| " + " | ".join([md_text(part) for part in row]
                                       + [cells.get(repr(v), "") for v in table.values]) + " |")
    means = []
    for value in table.values:
        overall, rows = table.overall(value)
        means.append(f"{ratio_text(overall)} over {rows} row{'s' if rows > 1 else ''}"
                     if overall.ratio is not None else "–")
    lines.append("| **Geometric mean** | " + " | ".join([""] * (len(heads) - 1) + means) + " |")
    if any(e.tf32_mixed for e in table.effects):
        lines += ["", f"{TF32_MARK} This ratio compares float32 cells that ran their matmuls or "
                  "convolutions differently (TF32 tensor cores in one, full float32 or not "
                  "recorded in the other): other arithmetic, left out of the geometric mean."]
    return lines + no_interval_note([e.estimate for e in table.effects])


def no_interval_note(estimates: list[Ratio]) -> list[str]:
    """Why ratios have no interval, once under their table."""
    reasons = list(dict.fromkeys(e.why for e in estimates if e.ratio is not None
                                 and not e.has_interval))
    return ["", "With no interval: " + "; ".join(md_text(r or "") for r in reasons) + "."] \
        if reasons else []


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
        parts += [f"### {md_text(table.title)}", "", *effect_table(table), ""]
        if table.changes:
            parts += [f"What each stack changes against {md_text(table.baseline)}'s (the "
                      "distributions its records name):", "",
                      *[f"- {md_text(env)}: {md_text(text)}"
                        for env, text in table.changes.items()], ""]
        if table.without_baseline:
            parts += [f"{table.without_baseline} group(s) have no cell at "
                      f"{md_text(table.factor)} = {md_text(shown(table.baseline))} (the "
                      "configured baseline) and are left out.", ""]
    return parts


def answers_section(summaries: list[CellSummary]) -> list[str]:
    ok = [s for s in summaries if s["status"] == "ok"]
    if not ok:
        return []
    counts = {status: sum(1 for s in ok if s.get("answer_check") == status)
              for status in (ANSWER_SAME, ANSWER_DIFFERENT, ANSWER_NO_MAJORITY,
                             ANSWER_DIFFERENT_WORK, ANSWER_ALONE, ANSWER_NOT_RECORDED,
                             ANSWER_UNCHECKED)}
    parts = ["## Different answers", "",
             "Every cell records a small fingerprint of what it computed on the seeded inputs "
             "(norms of the output, the initial loss and logits, the first step's loss, the "
             "first generated tokens), and the cells of a row are compared quantity by quantity "
             "with a relative tolerance set by their arithmetic: float32 "
             f"{ANSWER_TOLERANCES['float32']:g}, TF32 and float16 "
             f"{ANSWER_TOLERANCES['tf32']:g}, bfloat16 {ANSWER_TOLERANCES['bfloat16']:g}. "
             "The row's majority is the reference. A generate cell whose call did other work "
             "(other prompts, another number of generation-loop iterations) than its row's is "
             "marked too: different work.", "",
             "Cells: " + ", ".join(f"{n} {status}" for status, n in counts.items() if n) + ".", ""]
    differing = [s for s in ok if s.get("answer_differs")]
    if differing:
        parts += [f"- {md_code(s['cell_name'])} ({md_text(s['answer_check'])}, against "
                  f"{md_text(s.get('answer_reference') or 'the row')}): "
                  f"{md_text(s.get('answer_detail'))}"
                  for s in differing] + [""]
    else:
        parts += ["No cell computed a different answer.", ""]
    unchecked = [s for s in ok if s.get("answer_check") == ANSWER_UNCHECKED]
    if unchecked:
        parts += ["Not checked (the matrix sets `check_answers = false` on their benchmark): "
                  + ", ".join(md_code(s["cell_name"]) for s in unchecked) + ".", ""]
    alone = [s for s in ok if s.get("answer_check") == ANSWER_ALONE]
    if alone:
        parts += ["Alone in their row, nothing to compare with (Keras 2's keras-hub cells are "
                  "compared with Keras 2 cells only): "
                  + ", ".join(md_code(s["cell_name"]) for s in alone) + ".", ""]
    missing = [s for s in ok if s.get("answer_check") == ANSWER_NOT_RECORDED]
    if missing:
        unknown = "no fingerprint: a run made before answers were recorded, or a workload without one"
        parts += ["No answer recorded: " + ", ".join(
            f"{md_code(s['cell_name'])} ({md_text(s.get('answer_note') or unknown)})"
            for s in missing) + ".", ""]
    return parts


def _pair(first: float | None, second: float | None) -> str:
    return "–" if first is None and second is None else f"{fmt(first)} / {fmt(second)}"


def training_table(view: TableView) -> str | None:
    """One line per fit cell (rows in matrix order, environments in column order)."""
    fits = [s for s in view.summaries if s["task"] == "fit" and s["status"] != "not_applicable"]
    if not fits:
        return None
    environments, rows, marked = view.environments, view.rows, view.tf32_rows
    fits.sort(key=lambda s: (rows.index((s["label"], s["batch_size"])),
                             environments.index(s["environment"])))
    lines = ["| Workload (task) | Batch size | Environment | Epoch s, measured | Epoch s, step × "
             "steps | Train s (timed) | Accuracy | Loss first → last | RSS initial / peak MB | "
             "VRAM initial / peak MB |",
             "|---|---:|---|---:|---:|---:|---:|---|---:|---:|"]
    for s in fits:
        label = md_text(s["label"]) + (f" {TF32_MARK}" if (s["label"], s["batch_size"]) in marked
                                       else "")
        label += f" {ANSWER_MARK}" if s.get("answer_differs") else ""
        if s["status"] != "ok":
            lines.append(f"| {label} | {s['batch_size']} | {md_text(s['environment'])} | "
                         f"{md_text(s['status'])} "
                         "| | | | | | |")
            continue
        loss, acc = _sanity(s)
        lines.append(f"| {label} | {s['batch_size']} | {md_text(s['environment'])} | "
                     f"{fmt(s.get('epoch_measured_s'))} | {fmt(s.get('epoch_s'))} | "
                     f"{fmt(s.get('train_s'))} | {acc} | {loss} | "
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


def _paths_text(s: Mapping[str, Any]) -> str:
    """'conv on, matmul off': each dense path of the cell's workload, as recorded."""
    words: dict[Any, str] = {True: "on", False: "off"}
    return ", ".join(f"{path} {words.get(state, 'not recorded')}"
                     for path, state in (s.get("tf32_paths") or {}).items())


def tf32_section(summaries: list[CellSummary]) -> list[str]:
    """Which GPU cells ran their dense float32 work on TF32 tensor cores, on which paths, which
    did not, and which do not say (empty for a run without GPU cells: a CPU has no TF32)."""
    gpu = [s for s in summaries if s["status"] == "ok" and s.get("on_gpu")]
    if not gpu:
        return []
    lines = ["## TF32", "",
             "Whether each GPU cell's float32 matmuls and convolutions ran on TF32 tensor cores "
             "(10-bit mantissa, a different peak from float32), as its worker recorded it from the "
             "framework (`effective.tf32_detail`), on the paths its workload uses (the CNN, SAM "
             "and Stable Diffusion: convolutions and matmuls; torch runs cuDNN convolutions on "
             "TF32 by default and matmuls in float32):", ""]
    for state, title in ((True, "TF32 on"), (False, "TF32 off"), (None, "not recorded")):
        cells = [s for s in gpu if s.get("tf32_effective") is state]
        if cells:
            lines.append(f"- {title}: " + ", ".join(
                md_code(s["cell_name"]) + (f" ({md_text(_paths_text(s))})" if _paths_text(s)
                                           else "")
                for s in cells))
    return lines + [""]


def machine_lines(manifest: Manifest) -> list[str]:
    """The run's machine: its profile (or the lack of one) and locked clocks."""
    lines = []
    profile = manifest.get("machine_profile") or {}
    if profile and not profile.get("found") and profile.get("key"):
        lines.append(f"{md_text(profile.get('why'))}: compare keeps its fixed threshold and "
                     "clocks are "
                     "judged against 5 %; measure this machine's noise with `python -m runner "
                     "doctor --measure MATRIX`")
    clocks = manifest.get("gpu_clocks")
    if clocks:
        setting = "the TDP (base) clock" if clocks.get("setting") == "tdp" else \
            f"{md_text(clocks.get('setting'))} MHz"
        lines.append(f"GPU clocks were locked at {setting} for this run (not comparable with "
                     "unlocked runs)")
    return lines


def warnings_section(manifest: Manifest, summaries: list[CellSummary]) -> list[str]:
    """The warnings, grouped by kind in plain words (CONDITION_TITLES): the machine, the
    numbers themselves, throttling, other load, clocks, settle. In each group a line per cell
    for what its user must act on, then one line per other kind, naming its first cells and
    counting the rest."""
    machine = machine_lines(manifest)
    flagged = [s for s in summaries if s.get("warnings")]
    if not flagged and not machine:
        return []
    parts = ["## Warnings", ""]
    if machine:
        parts += ["### This machine", "", *[f"- {line}" for line in machine], ""]
    for group in ("statistics", *CONDITION_KINDS):
        lines = _group_lines(group, flagged)
        if not lines:
            continue
        parts += [f"### {CONDITION_TITLES[group]}", ""]
        if group == "statistics":
            parts += [f"CV limit {CV_LIMIT * 100:.0f} % (or this machine's own step-to-step "
                      f"CV, where its machine profile has one), minimum timed window "
                      f"{MIN_WINDOW_S:.0f} s:", ""]
        parts += [*lines, ""]
    return parts


def _group_lines(group: str, flagged: list[CellSummary]) -> list[str]:
    own: list[str] = []
    shared: dict[ConditionKind, list[str]] = {}
    for s in flagged:
        texts = (s.get("warning_groups") or {"statistics": s["warnings"]}).get(group) or []
        for text in texts:
            kind = condition_kind_of(group, text)
            if kind.act:
                own.append(f"- {md_code(s['cell_name'])}: {md_text(text)}")
            else:
                shared.setdefault(kind, []).append(f"{md_code(s['cell_name'])} ({md_text(text)})")
    return own + [f"- {kind.says[0].upper()}{kind.says[1:]}, {len(cells)} time(s): "
                  + _some(cells) for kind, cells in shared.items()]


NOISE_CELLS_NAMED = 5     # a kind of the machine's noise names this many cells, then counts


def _some(cells: list[str]) -> str:
    """The first cells with the kind, then how many more: on a noisy machine every cell has
    it, and a line naming 80 cells is the wall of warnings this section exists to avoid (each
    cell's CV is in the Cells table, each record keeps its telemetry)."""
    more = len(cells) - NOISE_CELLS_NAMED
    return "; ".join(cells[:NOISE_CELLS_NAMED]) + (f"; and {more} more" if more > 0 else "")


def _ci_text(s: Mapping[str, Any]) -> str:
    if s.get("median_ci_low_ms") is None:
        too_few = 0 < s.get("repeats_ok", 0) < MIN_CI_REPEATS
        return "–, too few repeats" if too_few else "–"
    return f"{fmt(s['median_ci_low_ms'])}–{fmt(s['median_ci_high_ms'])}"
