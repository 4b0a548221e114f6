"""The terminal table printed at the end of a run: median ms/step, rows × environments."""

from __future__ import annotations

from typing import Any

from . import decoding, native
from .formatting import DIFFERENT_MARK, best_text, cell_text, comparable_values, fmt
from .summaries import TF32_MARK, keras_view, pivot, tf32_rows
from .types import CellSummary


def terminal_table(summaries: list[CellSummary], title: str,
                   columns: list[str] | None = None, titles: dict[str, str] | None = None):
    """A rich table of median ms/step, rows × environments (in `columns` order, headed by
    `titles` where given; labels escaped: `[precision=...]` is not markup). The Keras table
    (`titles` given) ends with the Keras-over-native columns where it has native ones."""
    from rich.markup import escape
    from rich.table import Table

    environments, rows, grid = pivot(summaries)
    environments = columns or environments
    view = (summaries, environments, titles) if titles else None
    natives, costs = native.native_titles(view), native.best_columns(view)
    table = Table(title=title, title_justify="left")
    marked = tf32_rows(summaries)
    table.add_column("Workload (task)")
    table.add_column("Batch", justify="right")
    for env in environments:
        table.add_column(escape((titles or {}).get(env, env)), justify="right")
    for name in natives:
        table.add_column(escape(f"best Keras 3 ÷ {name}"), justify="right")
    for label, batch in rows:
        best = best_text(comparable_values((grid.get((label, batch, e)) for e in environments),
                                           "median_ms"))
        cells = []
        for env in environments:
            text = cell_text(grid.get((label, batch, env)), "median_ms", best)
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
        cells += [native.cost_text(costs[(label, batch)][name])
                  if name in costs.get((label, batch), {}) else "–" for name in natives]
        mark = f" {TF32_MARK}" if (label, batch) in marked else ""
        table.add_row(escape(label) + mark, str(batch), *cells)
    flagged = sum(1 for s in summaries if s.get("warnings"))
    differing = sum(1 for s in summaries if s.get("answer_differs"))
    table.caption = ("median of the repeat medians, ms/step; best in green (ties as printed all "
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
    first = first_token_table(summaries, keras)
    if first is not None:
        out.append(first)
    out.append(terminal_table(summaries, title))
    return out


def first_token_table(summaries: list[CellSummary], keras: Any):
    """The generate cells' time to first token and decode latency per token (ms), or None."""
    from rich.markup import escape
    from rich.table import Table

    cells = [s for s in summaries if s["status"] == "ok" and s.get("ttft_ms") is not None]
    if not cells:
        return None
    titles = decoding.keras_titles(keras)
    table = Table(title="Generate: time to first token", title_justify="left",
                  caption="ms; decode per token = (ms per call − first token) ÷ (tokens − 1)")
    for name in ("Workload (task)", "Batch", "Environment", "ms per call", "first token",
                 "decode per token", "tokens/s"):
        table.add_column(name, justify="left" if name in ("Workload (task)", "Environment")
                         else "right")
    for s in cells:
        table.add_row(escape(s["label"]), str(s["batch_size"]),
                      escape(titles.get(s["cell_id"], s["environment"])), fmt(s.get("median_ms")),
                      fmt(s.get("ttft_ms")), fmt(s.get("decode_ms_per_token")),
                      fmt(s.get("tokens_per_s")))
    return table
