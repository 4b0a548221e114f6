"""plots/profile-<k>.png: per profiled row, one stacked bar per cell — its profiled step split by
category (ms per step), the time outside ops last (idle). The same object API as plots.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...paths import folder_in_run
from ...worker.profiling.categories import CATEGORIES
from ..analysis.report_model import ProfiledRow, category_ms
from .plots import _figure, save

IDLE = "idle (no op)"


def profile_plots(root: Path, rows: list[ProfiledRow]) -> dict[tuple[str, int], str]:
    """{(row label, batch): the plot's path relative to the run folder}."""
    from matplotlib import colormaps

    colors = {c: colormaps["tab10"](i % 10) for i, c in enumerate([*CATEGORIES, IDLE])}
    out = {}
    for number, row in enumerate(rows, 1):
        fig = _figure(11.0, 0.5 * len(row.profiles) + 1.8)
        absolute, shares = fig.subplots(1, 2, sharey=True)
        names = [p["environment"] for p in row.profiles]
        segments = {c: [_segment(p, c) for p in row.profiles] for c in [*CATEGORIES, IDLE]}
        totals = [sum(values[i] for values in segments.values()) or 1.0
                  for i in range(len(names))]
        for ax, scale in ((absolute, [1.0] * len(names)), (shares, [100 / t for t in totals])):
            left = [0.0] * len(names)
            for category, values in segments.items():
                if not any(values):
                    continue
                widths = [v * k for v, k in zip(values, scale, strict=True)]
                ax.barh(range(len(names)), widths, left=left, label=category,
                        color=colors[category])
                left = [a + b for a, b in zip(left, widths, strict=True)]
        absolute.set_yticks(list(range(len(names))), names)
        absolute.invert_yaxis()
        absolute.set_xlabel("ms per step (profiled)")
        shares.set_xlabel("% of the step")
        shares.set_xlim(0, 100)
        fig.suptitle(f"Where the time goes: {row.label}, batch {row.batch_size}", fontsize=9)
        shares.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        relative = f"plots/profile-{number}.png"
        folder_in_run(root, "plots")
        save(fig, root / relative)
        out[(row.label, row.batch_size)] = relative
    return out


def _segment(profile: dict[str, Any], category: str) -> float:
    """A category's ms per step; the idle part is the step less the busy time."""
    kernels = profile.get("kernels") or {}
    if category != IDLE:
        return category_ms(profile).get(category, 0.0)
    step, busy = kernels.get("step_ms"), kernels.get("device_busy_us")
    return max(0.0, step - busy / 1000) if step and busy is not None else 0.0
