"""report.md's "Where the time goes": per profiled row, its cells' profiles side by side (the
profiled step, busy time, idle share, launches, ms per category), the sentence on its gap, its
stacked-bar plot and each cell's slowest ops. Op names come from traces (a user's workload
names its own functions): shown as code, with what would break a table or a code span
replaced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...worker.profiling.categories import CATEGORIES
from ..analysis.report_model import TOP_OPS, Profiled, ProfiledRow, category_ms, top_ops
from ..formatting import fmt, md_code, md_text

DOCS = "docs/profiles.md"


def code(text: Any, limit: int = 80, in_table: bool = True) -> str:
    """An op's or a cell's name as a code span, shortened to `limit` characters."""
    shown = str(text)
    return md_code(shown[:limit] + ("…" if len(shown) > limit else ""), in_table=in_table)


def _overhead(profile: Mapping[str, Any]) -> str:
    ratio = profile.get("profile_overhead")
    return fmt(profile.get("profiled_step_ms")) + (f" (×{ratio:.2f})" if ratio else "")


def figures_table(row: ProfiledRow) -> list[str]:
    cells = row.profiles
    kernels = [p.get("kernels") or {} for p in cells]
    lines = ["| | " + " | ".join(code(p["environment"], 40) for p in cells) + " |",
             "|---|" + "---:|" * len(cells),
             "| profiled ms/step (× unprofiled) | " + " | ".join(_overhead(p) for p in cells) + " |",
             "| busy ms/step | " + " | ".join(fmt((k.get("device_busy_us") or 0) / 1000)
                                               if k.get("device_busy_us") is not None else "–"
                                               for k in kernels) + " |",
             "| idle % of the step | " + " | ".join(f"{k['device_idle_pct']:.0f}"
                                                    if k.get("device_idle_pct") is not None
                                                    else "–" for k in kernels) + " |",
             "| launches per step | " + " | ".join(f"{k['launches_per_step']:.0f}"
                                                   if k.get("launches_per_step") is not None
                                                   else "–" for k in kernels) + " |"]
    by_category = [category_ms(p) for p in cells]
    for category in CATEGORIES:
        if any(category in c for c in by_category):
            lines.append(f"| {category} ms/step | "
                         + " | ".join(fmt(c.get(category)) if category in c else "–"
                                      for c in by_category) + " |")
    return lines


def ops_table(row: ProfiledRow) -> list[str]:
    lines = ["| environment | op | category | ms/step | calls/step | % of op time |",
             "|---|---|---|---:|---:|---:|"]
    for profile in row.profiles:
        for op in top_ops(profile):
            lines.append(f"| {code(profile['environment'], 40)} | {code(op['name'])} | "
                         f"{op['category']} | {fmt((op.get('us_per_step') or 0) / 1000)} | "
                         f"{fmt(op.get('count_per_step'))} | {fmt(op.get('pct'))} |")
    return lines


def profiles_section(profiled: Profiled | None) -> list[str]:
    if profiled is None or not (profiled.rows or profiled.failed):
        return []
    rows, plots, failed = profiled.rows, profiled.plots, profiled.failed
    first = rows[0].profiles[0] if rows else {}
    settings = first.get("settings") or {}
    out = ["", "## Where the time goes (profiles)", "",
           f"A profiled pass of each cell after its timed repeats, under its framework's own "
           f"profiler: {settings.get('steps', '?')} steps traced after "
           f"{settings.get('warmup', '?')} untraced, the device synchronised after each (never "
           "part of the timings above; × unprofiled: the profiled step over the same steps "
           "run just before the profiler began, in the same process and synchronised alike, "
           "so the profiler's own cost; the timed repeats synchronise once per block). Busy: the union of the ops' (GPU: kernels') time in a step; idle: the "
           "rest of the step; launches: ops (GPU: kernels and copies) started per step. On a "
           "CPU the ops are the host's, by their self time (scaled to the busy time where ops "
           "ran on several threads at once). Each cell's trace is "
           "`profiles/<cell id>/trace.json.gz` (open it in https://ui.perfetto.dev or "
           f"chrome://tracing), its table `kernels.json` ({DOCS}).", ""]
    for row in rows:
        out += [f"### {md_text(row.label)}, batch {row.batch_size}", ""]
        if row.sentence:
            out += [md_text(row.sentence), ""]
        out += figures_table(row) + [""]
        if (row.label, row.batch_size) in plots:
            out += [f"![Where the time goes: {md_text(row.label)}, batch {row.batch_size}]"
                    f"({plots[(row.label, row.batch_size)]})", ""]
        out += [f"The slowest ops of each cell (at most {TOP_OPS}):", ""]
        out += ops_table(row) + [""]
    if failed:
        out += ["Profiles that did not finish (a warning, never a failed cell):", ""]
        out += [f"- {code(p.get('cell_name'), 120, False)}: "
                f"{code(str(p.get('error') or 'failed').strip().splitlines()[-1], 200, False)} "
                f"(log: `{p.get('log')}`)" for p in failed]
        out.append("")
    return out
