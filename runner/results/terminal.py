"""The terminal table printed at the end of a run: ms/step (the geometric mean of the repeat
medians), rows × environments."""

from __future__ import annotations

from typing import Any

from .formatting import DIFFERENT_MARK, best_text, cell_text, comparable_values
from .summaries import TF32_MARK, TIME_KEY, keras_view, pivot, tf32_rows
from .types import CellSummary


def terminal_table(summaries: list[CellSummary], title: str,
                   columns: list[str] | None = None, titles: dict[str, str] | None = None):
    """A rich table of ms/step (geometric mean of the repeat medians), rows × environments (in `columns` order, headed by
    `titles` where given; labels escaped: `[precision=...]` is not markup)."""
    from rich.markup import escape
    from rich.table import Table

    environments, rows, grid = pivot(summaries)
    environments = columns or environments
    table = Table(title=title, title_justify="left")
    marked = tf32_rows(summaries)
    table.add_column("Workload (task)")
    table.add_column("Batch", justify="right")
    for env in environments:
        table.add_column(escape((titles or {}).get(env, env)), justify="right")
    for label, batch in rows:
        best = best_text(comparable_values((grid.get((label, batch, e)) for e in environments),
                                           TIME_KEY))
        cells = []
        for env in environments:
            text = cell_text(grid.get((label, batch, env)), TIME_KEY, best)
            if text.startswith("**"):
                text = f"[bold green]{text.strip('*')}[/]"
            elif text.endswith(DIFFERENT_MARK):
                text = f"{text[:-1]}[bold red]{DIFFERENT_MARK}[/]"
            elif text and text not in ("NA",) and not text[0].isdigit() and text != "–":
                text = f"[red]{text}[/]"
            cell = grid.get((label, batch, env))
            if cell is not None and cell.get("warnings"):
                text += " [yellow]![/]"
            cells.append(text)
        mark = f" {TF32_MARK}" if (label, batch) in marked else ""
        table.add_row(escape(label) + mark, str(batch), *cells)
    flagged = sum(1 for s in summaries if s.get("warnings"))
    differing = sum(1 for s in summaries if s.get("answer_differs"))
    table.caption = ("geometric mean of the repeat medians, ms/step (the ratios' estimator); "
                     "best in green (ties as printed all "
                     "green); NA = not applicable"
                     + (f"; [yellow]![/] {flagged} cell(s) with warnings (report.md)"
                        if flagged else "")
                     + (f"; {TF32_MARK} TF32 differs between the row's environments (report.md)"
                        if marked else "")
                     + (f"; [bold red]{DIFFERENT_MARK}[/] {differing} cell(s) computed a different "
                        "answer from their row, never best (report.md)" if differing else ""))
    return table


def tables(summaries: list[CellSummary], title: str) -> list[Any]:
    """What a run prints at its end: the Keras 3 benchmark table in the study's layout when the
    run has its rows, then every cell."""
    out = []
    keras = keras_view(summaries)
    if keras:
        rows, columns, titles = keras
        out.append(terminal_table(rows, f"Keras 3 benchmark table — {title}", columns, titles))
    out.append(terminal_table(summaries, title))
    return out
