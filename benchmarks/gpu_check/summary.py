"""What the GPU check reports: one screen for all parts (summary.txt, printed) — each part's
status, time against estimate and its figures (figures.py reads them from the runner's
folders) — and the same as JSON (summary.json), ending with the next call's --parts where some
parts did not fit. Standard library only (check.py's reason)."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from context import Context, Outcome
from out_folder import atomic_write

WAITING = ("dropped", "skipped")        # a part the budget did not hold: for the next call


def fmt(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    if number != number:
        return "—"
    return f"{number:.{digits}g}"


def next_parts(outcomes: list[Outcome]) -> list[str]:
    return [o.name for o in outcomes if o.status in WAITING]


def summary_lines(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    """One screen: per part its status, time against estimate and its figures."""
    total = time.monotonic() - ctx.started
    lines = [f"GPU check ({'dry run, ' if ctx.dry_run else ''}profile {ctx.profile}): "
             f"{total:.0f} s of a {ctx.budget_s:.0f} s budget"]
    for outcome in outcomes:
        took = f"{outcome.elapsed_s:.0f} s" if outcome.elapsed_s is not None else "—"
        lines.append(f"[{outcome.status:>7}] {outcome.name:<14} {took:>6} (est. "
                     f"{outcome.estimate_s:.0f} s)  {outcome.detail}"[:200])
        lines += [f"          {line}"[:200] for line in figure_lines(outcome)]
    waiting = next_parts(outcomes)
    if waiting:
        lines.append(f"next call: benchmarks/gpu_check/run.sh OUT --parts {','.join(waiting)}")
    return lines


def figure_lines(outcome: Outcome) -> list[str]:
    figures = outcome.figures
    if outcome.name == "overhead":
        return [f"{p['api']} {p['precision']}: runner {fmt(p['runner_ms'])} ms ÷ bare "
                f"{fmt(p['bare_ms'])} ms = {p['runner_over_bare']:.3f}; in one process, "
                f"clock ÷ bare {p['clock_over_bare']:.3f}" for p in figures.get("pairs", [])]
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
    out = [cell_line(row) for row in figures.get("cells", [])]
    out += [profile_line(p) for p in figures.get("profiles", [])]
    out += [gap_line(g) for g in figures.get("gaps", [])]
    out += [f"Keras tax {t['row']}: {t['keras']} {fmt(t['keras_ms'])} ms ÷ {t['native']} "
            f"{fmt(t['native_ms'])} ms = {t['tax']:.3g}" for t in figures.get("keras_tax", [])]
    out += [f"tiers {t['cell']}: defaults {fmt(t['defaults_ms'])} ms, tuned "
            f"{fmt(t['tuned_ms'])} ms ({t['status']}), gain {fmt(t['gain'])}"
            for t in figures.get("tiers", [])]
    out += [line for t in figures.get("tuning", []) for line in tuning_lines(t)]
    if "records" in figures:
        out.append(f"{figures['records_on_gpu']} of {figures['records']} records on the GPU; "
                   f"clock events: {', '.join(figures['clock_events']) or 'none'}")
    return out


def cell_line(row: dict[str, Any]) -> str:
    if row["status"] == "not_applicable":
        return f"{row['cell_name']}: not applicable: {row['error'] or ''}"
    extra = ""
    if row.get("fraction_of_peak"):
        extra += (f" {fmt(row['achieved_tflops'])} TFLOP/s ({float(row['fraction_of_peak']):.0%}"
                  f" of the measured {fmt(row['peak_tflops'])}; TF32 {row['tf32_effective']})")
    if row.get("ttft_ms"):
        extra += f" TTFT {fmt(row['ttft_ms'])} ms, {fmt(row['tokens_per_s'])} tok/s"
    if row.get("model_bytes_after"):
        extra += (f"; {fmt(row['model_bytes_before'])} → {fmt(row['model_bytes_after'])} B, "
                  f"error {fmt(float(row['quantization_relative_error'] or 'nan') * 100)} % "
                  f"({row['quantization_check'] or '?'}), top-1 "
                  f"{fmt(float(row['quantization_top1_agreement'] or 'nan') * 100)} %"
                  + (("; float8 ~emulated" if row.get("emulated") == "True" else
                      "; float8 native") if "float8" in str(row.get("precision")) else ""))
    if row.get("vram_peak_mb"):
        extra += f"; VRAM peak {fmt(row['vram_peak_mb'])} MB"
    if row.get("energy_per_step_j"):
        extra += (f" {fmt(row['energy_per_step_j'])} J/step "
                  f"({fmt(row['energy_per_step_above_idle_j'])} above idle)")
    return f"{row['cell_name']}: {row['status']} {fmt(row['geomean_ms'])} ms{extra}"


def profile_line(p: dict[str, Any]) -> str:
    shares = ", ".join(f"{k} {v:.0%}" for k, v in list(p.get("shares", {}).items())[:4])
    return (f"profile {p['cell']}: {p['status']} {p['source']} on {p['device']}, "
            f"{fmt(p['profiled_ms'])} ms/step (×{fmt(p['overhead'])}), idle "
            f"{fmt(p['idle_pct'])} %, {fmt(p['launches'])} launches/step; {shares}")


def gap_line(g: dict[str, Any]) -> str:
    if "sentence" in g:
        return f"report: {g['sentence']}"
    return (f"gap {g['row']}: {g['slow']} {fmt(g['slow_ms'])} ms ÷ {g['fast']} "
            f"{fmt(g['fast_ms'])} ms = {g['ratio']:.3g}× (one repeat each); launches/step "
            f"{fmt(g['launches'][0])} against {fmt(g['launches'][1])}, idle "
            f"{fmt(g['idle_pct'][0])} % against {fmt(g['idle_pct'][1])} %")


def tuning_lines(t: dict[str, Any]) -> list[str]:
    """A tuned cell: the knobs chosen and what the search took, then its probes."""
    knobs = ", ".join(f"{k}={v}" for k, v in t["knobs"].items()) or "the defaults"
    tried = [f"{', '.join(f'{k}={v}' for k, v in (p['knobs'] or {}).items()) or 'defaults'} "
             f"(rung {p['rung']}): {p['status']} {fmt(p['ms'])} ms, {fmt(p['wall_s'])} s"
             for p in t["tried"]]
    return [f"tuned {t['cell']}: {knobs} ({t['status']}; {t['probes']} probes in "
            f"{fmt(t['minutes'])} of {fmt(t['budget_minutes'])} min; the probes' gain "
            f"{fmt(t['probe_gain'])})", "  probes: " + "; ".join(tried)]


def write_summary(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    lines = summary_lines(ctx, outcomes)
    atomic_write(ctx.out / "summary.txt", "\n".join(lines) + "\n")
    atomic_write(ctx.out / "summary.json", json.dumps(
        {"profile": ctx.profile, "dry_run": ctx.dry_run, "budget_s": ctx.budget_s,
         "elapsed_s": time.monotonic() - ctx.started, "next_parts": next_parts(outcomes),
         "parts": [dataclasses.asdict(o) for o in outcomes]}, indent=1, default=str))
    return lines
