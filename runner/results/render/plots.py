"""PNG plots of a run's report model (plots/*.png in the run folder).

matplotlib is imported here only, and only its object API (`matplotlib.figure.Figure`, rendered by
the Agg canvas): no pyplot global state, no display needed, nothing left open between calls.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ...errors import shortened
from ...worker.protocol import atomic_target
from ..analysis.report_model import BETWEEN_ENVIRONMENTS, TIME_KEY, Analysis, ReportModel, shown
from ..data.types import CellSummary

DPI = 110
PLOT_LABEL = 60         # characters of a row's label a plot writes (a 20 kB option value took
                        # seconds of glyphs per figure)


@dataclass
class Plot:
    """One plot of the report: `path` relative to the run folder, or None with a note saying why
    it was skipped."""

    title: str
    path: str | None
    note: str = ""


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg")  # no display; harmless when already selected
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save(fig: Any, path: Path, dpi: int = DPI) -> None:
    """A plot is a result too: written whole or not at all. A character the font lacks (a
    user's option value in Chinese, an emoji) is drawn as a box, not warned about on stderr
    once per glyph and figure."""
    with atomic_target(path) as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from", UserWarning)
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")


def _colors(environments: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {env: cmap(i % 10) for i, env in enumerate(environments)}


def _ok(summary: CellSummary | None, key: str) -> bool:
    return summary is not None and summary["status"] == "ok" and summary.get(key) is not None


def time_bar(cell: CellSummary) -> tuple[float, float, float]:
    """(value, below, above) of a cell's bar: the tables' estimator (TIME_KEY, the geometric mean
    of the repeat medians), its whisker the range of the repeat medians (which holds it)."""
    value = float(cell.get(TIME_KEY) or 0.0)
    medians = cell.get("repeat_medians_ms") or [value]
    return value, max(0.0, value - min(medians)), max(0.0, max(medians) - value)


def time_plot(model: ReportModel, path: Path) -> str | None:
    """One panel per workload row, one bar per environment: ms/step as every table gives it (the
    geometric mean of the repeat medians), whiskers the range of the repeat medians."""
    view = model.cells_table
    environments, rows, grid = view.environments, view.rows, view.grid
    rows = [r for r in rows if any(_ok(grid.get((*r, e)), TIME_KEY) for e in environments)]
    if not rows:
        return "no cell finished"
    colors = _colors(environments)
    columns = 2 if len(rows) > 1 else 1
    lines = -(-len(rows) // columns)
    fig = _figure(6.0 * columns, 0.35 * len(environments) * lines + 1.2 * lines)
    axes = fig.subplots(lines, columns, squeeze=False)
    for ax, (label, batch) in zip(axes.flat, rows, strict=False):
        envs = [e for e in environments if _ok(grid.get((label, batch, e)), TIME_KEY)]
        bars = [time_bar(grid[(label, batch, e)]) for e in envs]
        medians = [value for value, _, _ in bars]
        low, high = [below for _, below, _ in bars], [above for _, _, above in bars]
        positions = range(len(envs))
        ax.barh(positions, medians, xerr=[low, high], color=[colors[e] for e in envs],
                capsize=3, error_kw={"elinewidth": 1})
        ax.set_yticks(list(positions), envs)
        ax.invert_yaxis()
        ax.set_title(f"{shortened(label, PLOT_LABEL)}, batch {batch}", fontsize=9)
        ax.set_xlabel("ms/step (geometric mean of the repeat medians; bars: their range)",
                      fontsize=8)
        ax.tick_params(labelsize=8)
        for y, value, above in zip(positions, medians, high, strict=True):
            ax.annotate(f"{value:.3g}", (value + above, y), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_xlim(0, max(m + h for m, h in zip(medians, high, strict=True)) * 1.18)
    for ax in list(axes.flat)[len(rows):]:
        ax.set_visible(False)
    fig.suptitle("Time per step by workload and environment (lower is better)")
    save(fig, path)
    return None


def keras_speedup_plot(model: ReportModel, path: Path) -> str | None:
    """The Keras 3 benchmark page's figure: speedup of the best Keras 3 backend over Keras 2."""
    rows = [(row, e) for row, e in model.speedups.items() if e["speedup"]]
    if not rows:
        return "no row has both a Keras 3 and a Keras 2 (tf-keras) result"
    fig = _figure(7.5, 0.45 * len(rows) + 1.4)
    ax = fig.subplots()
    labels = [f"{shortened(label, PLOT_LABEL)}, b{batch}" for (label, batch), _ in rows]
    values = [e["speedup"] for _, e in rows]
    colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
    ax.barh(range(len(rows)), values, color=colors)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    for y, ((_, e), value) in enumerate(zip(rows, values, strict=True)):
        ax.annotate(f"{value:.2f}× ({e['best_backend']})", (value, y), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("Keras 2 ms/step ÷ best Keras 3 ms/step (above 1: Keras 3 faster)")
    ax.set_xlim(0, max(values) * 1.3)
    fig.suptitle("Speedup of the best Keras 3 backend over Keras 2")
    save(fig, path)
    return None


def _per_cell_bars(summaries: list[CellSummary], series: list[tuple[str, str]], path: Path,
                   title: str, xlabel: str) -> str | None:
    """Horizontal bars, one group per ok cell, one bar per (key, legend label) series."""
    cells = [s for s in summaries if any(_ok(s, key) for key, _ in series)]
    series = [(key, name) for key, name in series if any(_ok(s, key) for s in cells)]
    if not cells:
        return "no cell recorded it"
    height = 0.8 / len(series)
    fig = _figure(8.0, 0.3 * len(cells) * len(series) + 1.5)
    ax = fig.subplots()
    for i, (key, name) in enumerate(series):
        values = [s.get(key) or 0.0 for s in cells]
        ax.barh([y + i * height for y in range(len(cells))], values, height=height, label=name)
    ax.set_yticks([y + height * (len(series) - 1) / 2 for y in range(len(cells))],
                  [f"{shortened(s['label'], PLOT_LABEL)}, b{s['batch_size']} · "
                   f"{s['environment']}" for s in cells],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if len(series) > 1:
        ax.legend(fontsize=8)
    else:
        ax.set_title(series[0][1], fontsize=9)
    fig.suptitle(title)
    save(fig, path)
    return None


def memory_plot(model: ReportModel, path: Path) -> str | None:
    return _per_cell_bars(model.summaries, [("rss_peak_mb", "process RSS peak"),
                                      ("vram_peak_mb", "framework VRAM peak")],
                          path, "Peak memory per cell", "MB")


def energy_plot(model: ReportModel, path: Path) -> str | None:
    return _per_cell_bars(model.summaries, [("energy_per_step_j", "NVML energy per step")], path,
                          "GPU energy per step", "J per step (median over repeats)")


MAX_FOREST_ROWS = 60       # beyond this the forest shows the geometric means only


def _forest_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """The forest's lines, top to bottom: per factor and value, its rows, then their mean."""
    lines: list[dict[str, Any]] = []
    every = sum(len(t.effects) for t in analysis.tables) <= MAX_FOREST_ROWS
    for table in analysis.tables:
        for value in table.values:
            effects = [e for e in table.of(value) if e.estimate.ratio is not None]
            if not effects:
                continue
            subject = (f"{value} vs {table.baseline}" if table.factor in BETWEEN_ENVIRONMENTS
                       else f"{table.factor}={shown(value)} vs {shown(table.baseline)}")
            if every:
                for e in effects:
                    where = shortened(e.label, PLOT_LABEL) + (
                        "" if table.factor == "batch_size" else f", b{e.batch_size}")
                    where += "" if table.factor in BETWEEN_ENVIRONMENTS else f" · {e.environment}"
                    lines.append({"text": f"{subject}: {where}", "estimate": e.estimate,
                                  "differs": e.differs, "mean": False})
            overall, rows = table.overall(value)
            if overall.ratio is not None and (rows > 1 or not every):
                lines.append({"text": f"{subject}: geometric mean of {rows} rows",
                              "estimate": overall, "differs": False, "mean": True})
    return lines


def forest_plot(analysis: Analysis, path: Path) -> str | None:
    """Every effect as a point (the speedup) with its 95 % interval, on a log scale around 1;
    the geometric means as diamonds; hollow: no interval; red: a cell with a different answer."""
    lines = _forest_rows(analysis)
    if not lines:
        return "no axis or environment takes two values with results"
    fig = _figure(10.0, 0.3 * len(lines) + 1.6)
    ax = fig.subplots()
    for y, line in enumerate(lines):
        r = line["estimate"]
        color = "tab:red" if line["differs"] else ("black" if line["mean"] else "tab:blue")
        if r.has_interval:
            ax.plot([r.low, r.high], [y, y], color=color, linewidth=1.5)
        ax.plot([r.ratio], [y], marker="D" if line["mean"] else "o", markersize=7 if line["mean"] else 5,
                color=color, markerfacecolor=color if r.has_interval else "white")
    ax.axvline(1.0, color="grey", linewidth=1, linestyle="--")
    ax.set_xscale("log")
    ax.set_yticks(range(len(lines)), [line["text"] for line in lines], fontsize=7)
    ax.set_ylim(len(lines) - 0.5, -0.5)
    ax.set_xlabel("speedup: baseline time ÷ this time (log scale; right of 1: faster), "
                  "95 % interval", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("Effects against their baselines (hollow: no interval; red: different answer)",
                 fontsize=10)
    save(fig, path)
    return None


PLOTS: list[tuple[str, str, Callable[[ReportModel, Path], str | None]]] = [
    ("time.png", "Time per step", time_plot),
    ("keras_speedup.png", "Speedup of the best Keras 3 backend over Keras 2", keras_speedup_plot),
    ("memory.png", "Peak memory", memory_plot),
    ("energy.png", "Energy", energy_plot),
]


FOREST = ("effects.png", "Effects (forest plot)")


def write_plots(root: Path, model: ReportModel) -> list[Plot]:
    """Write every plot of `model` under root/plots/ (the forest plot of its effects first); a
    plot with nothing to show is skipped with a note, and a stale file of that name from an
    earlier report is removed. All are drawn in a folder beside first and moved in when all are
    drawn: a report interrupted meanwhile leaves the plots it had (each file moved in whole)."""
    folder = root / "plots"
    if folder.is_symlink():      # never written through: it could point anywhere
        raise OSError(f"{folder} is a symbolic link")
    folder.mkdir(exist_ok=True)
    analysis = model.analysis
    drawn = [(*FOREST, lambda _, target: forest_plot(analysis, target))] if analysis else []
    fresh = Path(tempfile.mkdtemp(prefix=".plots-", dir=root))
    try:
        out = []
        for name, title, draw in drawn + PLOTS:
            skipped = draw(model, fresh / name)
            out.append(Plot(title, None, skipped) if skipped else Plot(title, f"plots/{name}"))
        for (name, _, _), plot in zip(drawn + PLOTS, out, strict=True):
            if plot.path:
                os.replace(fresh / name, folder / name)
            else:
                (folder / name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return out
