"""`runner history site -o DIR`: a static trend site that opens offline (no CDN, no script):
index.html (cell families, environments, the latest run's table, change points), one page per
cell family (a row of the report: workload, task, axes, batch size) with its trend plot — one
line per environment, the 95 % intervals as error bars, change points marked, and a dotted line
where a cell's method version changed (the worker code it runs: the numbers either side are not
compared) — and, beside the plot, each point's run, figures and stack diff against the point
before.

Plots are PNGs drawn with matplotlib's object API (no pyplot state), written beside the pages.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import defaultdict
from pathlib import Path

from sqlalchemy.engine import Engine

from ..errors import shortened
from ..results.render.plots import PLOT_LABEL, save
from ..worker.protocol import write_text_atomic
from . import changepoints
from .queries import Point, cell_names, latest_cells, run_time, series

DPI = 100
# A point measured by another method version than the one before (runner/version.py): the
# series is cut there; the numbers on either side are not compared.
METHOD_MARK = ("<span class=\"method\" title=\"the worker code this cell runs changed: "
               "not comparable with the points before\">method changed</span>")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.slower { color: #b00020; font-weight: bold; } .faster { color: #1b7f3b; font-weight: bold; }
.method { color: #555; font-style: italic; }
.stack { font-size: 12px; color: #444; white-space: pre-line; }
.layout { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
img { border: 1px solid #ddd; max-width: 100%; }
"""


def slug(text: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]
    return f"{base}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def e(value) -> str:
    return html.escape("–" if value is None else str(value))


def fmt(value, pattern: str = ".4g") -> str:
    return "–" if value is None else format(value, pattern)


def write_site(engine: Engine, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "families").mkdir(exist_ok=True)
    families: dict[str, list[tuple[str, list[Point], list]]] = defaultdict(list)
    for name in cell_names(engine, "*"):
        points = series(engine, name)
        if not points:
            continue
        family = f"{points[-1].label}, batch {points[-1].batch_size}"
        families[family].append((name, points, changepoints.change_points(name, points)))
    links = []
    for family, members in sorted(families.items()):
        target = f"families/{slug(family)}.html"
        plot = f"families/{slug(family)}.png"
        draw(family, members, out / plot)
        write_text_atomic(out / target, family_page(family, members, Path(plot).name))
        found = sum(len(cps) for _, _, cps in members)
        links.append((family, target, members, found))
    index = out / "index.html"
    write_text_atomic(index, index_page(links, latest_cells(engine)))
    return index


def draw(family: str, members, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    runs = sorted({(p.started_at or "", p.run_pk, p.run_id) for _, pts, _ in members for p in pts})
    position = {run_pk: i for i, (_, run_pk, _) in enumerate(runs)}
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for _, points, cps in members:
        ok = [p for p in points if p.status == "ok" and p.time_ms]
        if not ok:
            continue
        xs = [position[p.run_pk] for p in ok]
        ys = [float(p.time_ms or 0) for p in ok]
        low = [max(0.0, y - p.ci_low_ms) if p.ci_low_ms is not None else 0
               for y, p in zip(ys, ok, strict=True)]
        high = [max(0.0, p.ci_high_ms - y) if p.ci_high_ms is not None else 0
                for y, p in zip(ys, ok, strict=True)]
        line = ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3,
                           label=shortened(ok[0].environment, PLOT_LABEL))
        for changed in changepoints.method_changes(points):     # not comparable across it
            x = position[changed.run_pk]
            ax.axvline(x - 0.5, color="#777777", linestyle=":", linewidth=1.2)
            ax.annotate("method", (x - 0.5, min(ys)), color="#555555", textcoords="offset points",
                        xytext=(3, -10), fontsize=8)
        for cp in cps:
            x = position[cp.point.run_pk]
            ax.axvline(x - 0.5, color="#b00020" if cp.slower else "#1b7f3b", linestyle="--",
                       linewidth=1.2)
            ax.annotate(f"{cp.ratio:.2f}×", (x - 0.5, max(ys)), color=line.lines[0].get_color(),
                        textcoords="offset points", xytext=(3, 4), fontsize=8)
    ax.set_xticks(range(len(runs)), [run_id.split("/")[-1][:16] for _, _, run_id in runs],
                  rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("ms/step, geometric mean of the repeat medians (95 % interval)")
    ax.set_title(shortened(family, PLOT_LABEL), fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=8)
    else:                               # every point failed: a legend of nothing would warn
        ax.text(0.5, 0.5, "no ok measurement", transform=ax.transAxes, ha="center")
    save(fig, path, dpi=DPI)


def family_page(family: str, members, plot: str) -> str:
    parts = [f"<p><a href=\"../index.html\">← all cell families</a></p><h1>{e(family)}</h1>",
             "<div class=\"layout\"><div>",
             f"<img src=\"{plot}\" alt=\"trend of {e(family)}\" id=\"trend\"></div><div>"]
    for name, points, cps in members:
        marks = {cp.point.run_pk: cp for cp in cps}
        parts.append(f"<h2 id=\"{slug(name)}\">{e(points[-1].environment)} "
                     f"<small>({e(name)})</small></h2>")
        parts.append("<table class=\"points\"><tr><th>run</th><th>started</th><th>ms</th>"
                     "<th>95 % interval</th><th>change point</th><th>stack diff</th></tr>")
        for p in points:
            median = fmt(p.time_ms) if p.status == "ok" else e(p.status)
            cp = marks.get(p.run_pk)
            mark = (f"<span class=\"{cp.direction}\">{cp.ratio:.3f}× {cp.direction}</span>"
                    if cp else METHOD_MARK if p.method_changed else "")
            stack = "first" if p.change is None else p.change.text().replace("; ", "\n")
            parts.append(f"<tr><td>{e(p.run_id)}</td><td>{e(p.started_at)}</td>"
                         f"<td class=\"num\">{median}</td><td class=\"num\">"
                         f"{fmt(p.ci_low_ms)}–{fmt(p.ci_high_ms)}</td><td>{mark}</td>"
                         f"<td class=\"stack\">{e(stack)}</td></tr>")
        parts.append("</table>")
    parts.append("</div></div>")
    return page(family, "\n".join(parts))


def index_page(links, latest: list[dict]) -> str:
    parts = ["<h1>Benchmark history</h1>", "<h2>Cell families</h2>",
             "<table><tr><th>family</th><th>environments</th><th>runs</th>"
             "<th>change points</th></tr>"]
    environments = set()
    for family, target, members, found in links:
        envs = sorted({pts[-1].environment for _, pts, _ in members})
        environments.update(envs)
        runs = len({p.run_pk for _, pts, _ in members for p in pts})
        parts.append(f"<tr><td><a href=\"{target}\">{e(family)}</a></td><td>{e(', '.join(envs))}"
                     f"</td><td class=\"num\">{runs}</td><td class=\"num\">{found}</td></tr>")
    parts.append("</table><h2>Environments</h2><ul>")
    parts += [f"<li>{e(env)}</li>" for env in sorted(environments)]
    parts.append("</ul>")
    if latest:
        parts.append("<h2>Latest run</h2><table><tr><th>workload (task)</th><th>batch</th>"
                     "<th>environment</th><th>status</th><th>ms</th>"
                     "<th>95 % interval</th></tr>")
        for c in latest:
            parts.append(f"<tr><td>{e(c['label'])}</td><td class=\"num\">{e(c['batch_size'])}</td>"
                         f"<td>{e(c['environment_name'])}</td><td>{e(c['status'])}</td>"
                         f"<td class=\"num\">{fmt(run_time(c['repeat_medians_ms'], c['median_ms']))}"
                         "</td><td class=\"num\">"
                         f"{fmt(c['ci_low_ms'])}–{fmt(c['ci_high_ms'])}</td></tr>")
        parts.append("</table>")
    return page("Benchmark history", "\n".join(parts))
