"""plots/scaling-<k>.png: per scaling row (analysis/scaling.py), items/s against devices, one line
per environment, each with its linear scaling from its smallest count dashed beside it. The
same object API as plots.py."""

from __future__ import annotations

from pathlib import Path

from ..analysis.report_model import ScalingRow
from .plots import Plot, _colors, _figure, save

PREFIX = "scaling-"


def scaling_plots(root: Path, rows: list[ScalingRow]) -> list[Plot]:
    """One plot per row, in order (earlier reports' plots of this kind removed first)."""
    folder = root / "plots"
    if folder.is_symlink():      # never written through: it could point anywhere
        raise OSError(f"{folder} is a symbolic link")
    folder.mkdir(exist_ok=True)
    for stale in folder.glob(f"{PREFIX}*.png"):
        stale.unlink()
    out = []
    for number, row in enumerate(rows, 1):
        relative = f"plots/{PREFIX}{number}.png"
        title = f"Scaling: {row.label}, batch {row.batch_size}"
        if draw(row, root / relative, title):
            out.append(Plot(title, relative))
        else:
            out.append(Plot(title, None, "no environment has two measured device counts"))
    return out


def draw(row: ScalingRow, path: Path, title: str) -> bool:
    colors = _colors(list(row.environments))
    fig = _figure(6.4, 3.8)
    ax = fig.subplots()
    drawn = False
    for env, points in row.environments.items():
        measured = [(p.devices, p.items_per_s) for p in points if p.items_per_s is not None]
        if len(measured) < 2:
            continue
        drawn = True
        xs, ys = zip(*measured, strict=True)
        ax.plot(xs, ys, marker="o", color=colors[env], label=env)
        first_x, first_y = measured[0]
        ax.plot(xs, [first_y * x / first_x for x in xs], linestyle="--", linewidth=0.8,
                color=colors[env])
    if not drawn:
        return False
    ax.set_xscale("log", base=2)
    ax.set_xticks(row.devices, [str(d) for d in row.devices])
    ax.set_xlabel("devices")
    ax.set_ylabel("items/s (dashed: linear)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    save(fig, path)
    return True
