"""Where the time goes: a run's profiles (results/data/profiles.py) set side by side per row of
its table, the sentence that explains a row's gap, and the diff of two profiles.

A row's gap is read from the run's own estimator (each cell's geometric mean of its repeat
medians, from its summary) with the effects' interval, never from a profiled pass's times or a
median of medians (a finding once said "28.4×" beside the table's 6.53×); a sentence is written
only where the gap is beyond noise and neither cell carries a warning.

Profiles of the same framework's profiler compare op by op; across profilers (torch against
JAX, say) only by category, since their ops are other code with other names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...worker.profiling.categories import CATEGORIES
from .speedups import speedup
from .summaries import TIME_KEY

TOP_OPS = 10
# A launch-count or category gap this large is named as a cause of a row's gap.
LAUNCH_RATIO = 2.0
CATEGORY_SHARE = 0.1           # of the time gap between the two cells
MIN_GAP = 1.1                  # a smaller gap between a row's cells gets no sentence


@dataclass
class Profiled:
    """What the report shows of a run's profiles: its rows, their plots, the failed passes."""

    rows: list[ProfiledRow]
    plots: dict[tuple[str, int], str] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ProfiledRow:
    """The profiled cells of one row (workload, task, axes) at one batch size."""

    label: str
    batch_size: int
    profiles: list[dict[str, Any]] = field(default_factory=list)    # matrix order
    sentence: str | None = None            # the row's gap, where beyond noise (judge_rows)


def rows_of(profiles: Sequence[Mapping[str, Any]]) -> list[ProfiledRow]:
    """The ok profiles grouped by their row, rows and cells in the order they were profiled."""
    rows: dict[tuple[str, int], ProfiledRow] = {}
    for profile in profiles:
        if profile.get("status") != "ok" or not profile.get("kernels"):
            continue
        key = (str(profile.get("row")), int(profile.get("batch_size") or 0))
        rows.setdefault(key, ProfiledRow(*key)).profiles.append(dict(profile))
    return list(rows.values())


def category_ms(profile: Mapping[str, Any]) -> dict[str, float]:
    """ms per step by category (the kernels table's µs)."""
    categories = (profile.get("kernels") or {}).get("categories") or {}
    return {c: categories[c] / 1000 for c in CATEGORIES if categories.get(c)}


def top_ops(profile: Mapping[str, Any], count: int = TOP_OPS) -> list[dict[str, Any]]:
    return list(((profile.get("kernels") or {}).get("rows") or [])[:count])


def judge_rows(profiled: Profiled, summaries: Sequence[Mapping[str, Any]]) -> None:
    """Each profiled cell's time from its summary (TIME_KEY, the geometric mean of its repeat
    medians: the estimator of every table), and each row's gap sentence (explain)."""
    by_id = {s["cell_id"]: s for s in summaries}
    for row in profiled.rows:
        for profile in row.profiles:
            summary = by_id.get(profile.get("cell_id"))
            profile["time_ms"] = summary.get(TIME_KEY) if summary is not None \
                and summary["status"] == "ok" else None
        row.sentence = explain(row, by_id)


def explain(row: ProfiledRow, summaries: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One sentence on the row's biggest gap, where the profiles show a clear cause: the
    slowest and the fastest profiled cell by the run's estimator (their summaries' geometric
    means, by cell id), their ratio with the effects' interval, then what differs most — ops
    launched per step, the share of the step outside ops, the category that grew most. None
    unless the gap is beyond noise (its interval excludes 1: with one repeat a side, never)
    and neither cell carries a warning."""
    timed = [(p, summaries[p["cell_id"]]) for p in row.profiles
             if p.get("cell_id") in summaries and summaries[p["cell_id"]]["status"] == "ok"
             and summaries[p["cell_id"]].get(TIME_KEY)]
    if len(timed) < 2:
        return None
    fast, fast_s = min(timed, key=lambda pair: pair[1][TIME_KEY])
    slow, slow_s = max(timed, key=lambda pair: pair[1][TIME_KEY])
    gap = speedup(slow_s, fast_s)          # slow ÷ fast, with the effects' interval
    if gap.ratio is None or gap.ratio < MIN_GAP or not gap.distinguishable \
            or slow_s.get("warnings") or fast_s.get("warnings"):
        return None
    causes = gap_causes({**slow, "time_ms": slow_s[TIME_KEY]},
                        {**fast, "time_ms": fast_s[TIME_KEY]})
    if not causes:
        return None
    return (f"{row.label}, batch {row.batch_size}: {slow['environment']} takes "
            f"{gap.ratio:.3g}× (95 % CI {gap.low:.3g}–{gap.high:.3g}) the time of "
            f"{fast['environment']} ({slow_s[TIME_KEY]:.3g} against {fast_s[TIME_KEY]:.3g} "
            "ms/step, geometric means of the repeat medians); in their profiles "
            + "; ".join(causes) + ".")


def gap_causes(slow: Mapping[str, Any], fast: Mapping[str, Any]) -> list[str]:
    """What the slow cell's profile shows against the fast one's, in words with numbers."""
    out = []
    a, b = slow.get("kernels") or {}, fast.get("kernels") or {}
    name = slow["environment"]
    launches_a, launches_b = a.get("launches_per_step"), b.get("launches_per_step")
    if launches_a and launches_b and launches_a / launches_b >= LAUNCH_RATIO:
        what = "kernels" if a.get("device") == "gpu" else "ops"
        out.append(f"{name} launches {launches_a / launches_b:.3g}× more {what} per step "
                   f"({launches_a:.0f} against {launches_b:.0f})")
    idle_a, idle_b = a.get("device_idle_pct"), b.get("device_idle_pct")
    if idle_a is not None and idle_b is not None and idle_a - idle_b >= 20:
        where = "the GPU waits between kernels" if a.get("device") == "gpu" else \
            "no op runs (Python and framework overhead between ops)"
        out.append(f"{idle_a:.0f} % of its step is time where {where}, against {idle_b:.0f} %")
    gap_ms = slow["time_ms"] - fast["time_ms"]
    slow_ms, fast_ms = category_ms(slow), category_ms(fast)
    grown = sorted(((slow_ms.get(c, 0.0) - fast_ms.get(c, 0.0), c) for c in CATEGORIES),
                   reverse=True)
    named = [f"{c} {delta:.3g} ms more ({slow_ms.get(c, 0.0):.3g} against "
             f"{fast_ms.get(c, 0.0):.3g})" for delta, c in grown[:2]
             if gap_ms > 0 and delta >= CATEGORY_SHARE * gap_ms]
    if named:
        across = "" if same_profiler(slow, fast) else \
            " (by category: their profilers name other code)"
        out.append("per step " + " and ".join(named) + across)
    return out


def biggest_gap(rows: Sequence[ProfiledRow]) -> str | None:
    """The sentence of the row whose profiled cells are furthest apart (judge_rows first)."""
    def spread(row: ProfiledRow) -> float:
        timed = [p["time_ms"] for p in row.profiles if p.get("time_ms")]
        return max(timed) / min(timed) if len(timed) >= 2 else 0.0

    return next((row.sentence for row in sorted(rows, key=spread, reverse=True)
                 if row.sentence), None)


# --- diff ----------------------------------------------------------------------------------------

def same_profiler(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (a.get("kernels") or {}).get("source") == (b.get("kernels") or {}).get("source")


def diff(a: Mapping[str, Any], b: Mapping[str, Any], top: int = 20) -> dict[str, Any]:
    """B against A: ms per step by category, and (the same profiler on both sides) the ops
    whose time moved most, with their calls per step: + (more in B), - (fewer), = (as many),
    or only in one of them."""
    ca, cb = category_ms(a), category_ms(b)
    categories = [(c, ca.get(c, 0.0), cb.get(c, 0.0), cb.get(c, 0.0) - ca.get(c, 0.0))
                  for c in CATEGORIES if c in ca or c in cb]
    out: dict[str, Any] = {"categories": categories, "op_level": same_profiler(a, b), "ops": []}
    if not out["op_level"]:
        return out
    rows_a = {r["name"]: r for r in (a.get("kernels") or {}).get("rows") or []}
    rows_b = {r["name"]: r for r in (b.get("kernels") or {}).get("rows") or []}
    ops = []
    for name in {*rows_a, *rows_b}:
        ra, rb = rows_a.get(name), rows_b.get(name)
        ms_a = (ra or {}).get("us_per_step") or 0.0
        ms_b = (rb or {}).get("us_per_step") or 0.0
        if ra is None or rb is None:
            mark = "only in B" if ra is None else "only in A"
        else:
            calls_a, calls_b = ra.get("count_per_step") or 0, rb.get("count_per_step") or 0
            mark = "+" if calls_b > calls_a + 1e-9 else "-" if calls_b < calls_a - 1e-9 else "="
        ops.append({"name": name, "category": (ra or rb or {}).get("category", "other"),
                    "a_ms": ms_a / 1000, "b_ms": ms_b / 1000, "delta_ms": (ms_b - ms_a) / 1000,
                    "a_calls": (ra or {}).get("count_per_step"),
                    "b_calls": (rb or {}).get("count_per_step"), "mark": mark})
    out["ops"] = sorted(ops, key=lambda o: -abs(o["delta_ms"]))[:top]
    return out
