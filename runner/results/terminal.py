"""The terminal table printed at the end of a run: median ms/step, rows × environments."""

from __future__ import annotations

from typing import Any

from .formatting import cell_text
from .summaries import pivot


def terminal_table(summaries: list[dict[str, Any]], title: str):
    """A rich table of median ms/step, rows × environments (labels escaped: `[precision=...]`
    is not markup)."""
    from rich.markup import escape
    from rich.table import Table

    environments, rows, grid = pivot(summaries)
    table = Table(title=title, title_justify="left")
    table.add_column("Workload (task)")
    table.add_column("Batch", justify="right")
    for env in environments:
        table.add_column(escape(env), justify="right")
    for label, batch in rows:
        ok = [grid[(label, batch, e)]["median_ms"] for e in environments
              if (label, batch, e) in grid and grid[(label, batch, e)]["status"] == "ok"]
        best = min(ok) if ok else None
        cells = []
        for env in environments:
            text = cell_text(grid.get((label, batch, env)), "median_ms", best)
            if text.startswith("**"):
                text = f"[bold green]{text.strip('*')}[/]"
            elif text and text not in ("NA",) and not text[0].isdigit() and text != "–":
                text = f"[red]{text}[/]"
            if (grid.get((label, batch, env)) or {}).get("warnings"):
                text += " [yellow]![/]"
            cells.append(text)
        table.add_row(escape(label), str(batch), *cells)
    flagged = sum(1 for s in summaries if s.get("warnings"))
    table.caption = ("median ms/step over all repeats; best in green; NA = not applicable"
                     + (f"; [yellow]![/] {flagged} cell(s) with warnings (report.md)" if flagged else ""))
    return table
