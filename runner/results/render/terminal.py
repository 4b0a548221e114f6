"""The terminal table printed at the end of a run: ms/step (the geometric mean of the repeat
medians), rows × environments."""

from __future__ import annotations

import re
from typing import Any

from ..analysis.report_model import (TF32_MARK, TIME_KEY, ReportModel, TableView, ratio_cell,
                                     ttft_text)
from ...errors import user_text
from ..formatting import DIFFERENT_MARK, EMULATED_MARK, best_text, cell_text, comparable_values, fmt


def terminal_table(view: TableView, title: str):
    """A rich table of ms/step (the geometric mean of the repeat medians), rows × environments
    (the view's columns, headed by its titles; labels escaped: `[precision=...]` is not markup).
    The Keras table ends with the Keras-over-native columns where it has native ones."""
    from rich import box
    from rich.table import Table

    environments, rows, grid, titles = view.environments, view.rows, view.grid, view.titles
    natives, costs = view.natives, view.native_ratios
    # No outer border and one space between columns; an environment's name breaks after its
    # hyphens in the header, a number never breaks: eight environments fit 100 columns.
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, 1, 0, 0))
    marked = view.tf32_rows
    table.add_column("Workload (task)", overflow="fold", min_width=12)
    table.add_column("Batch", justify="right", no_wrap=True)
    for env in environments:
        table.add_column(header(titles.get(env, env)), justify="right", no_wrap=True)
    for name in natives:
        table.add_column(header(f"best Keras 3 ÷ {name}"), justify="right", no_wrap=True)
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
            if (label, batch, env) in view.flagged:
                text += " [yellow]![/]"
            cells.append(text)
        cells += [ratio_cell(costs[(label, batch)][name])
                  if name in costs.get((label, batch), {}) else "–" for name in natives]
        mark = f" {TF32_MARK}" if (label, batch) in marked else ""
        table.add_row(user_text(label) + mark, str(batch), *cells)
    table.caption = caption(view)
    return FittedTable(table)


class FittedTable:
    """A results table that keeps its row labels on any terminal: where its columns do not fit
    the width, the value columns go into several tables one under the other, each repeating
    the label columns (the way pandas prints a wide frame). rich alone would squeeze the label
    column to nothing, leaving rows of numbers no one can name."""

    LABEL_COLUMNS = 2               # "Workload (task)" and "Batch"
    LABEL_WIDTH = 40                # the workload label folds beyond this, never the numbers

    def __init__(self, table: Any):
        self.table = table

    @property
    def columns(self) -> list[Any]:
        return self.table.columns

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        # The title above, wrapped at the terminal's edge too: a one-column table would fold
        # "name (run folder)" into three lines.
        if self.table.title:
            yield Text.from_markup(self.table.title, style="table.title")
        groups = self.groups(console, options)
        for group in groups:
            # One group: the labels as wide as the terminal allows; several: folded at
            # LABEL_WIDTH, the width the groups were measured with.
            yield self.part(group, fold_labels=len(groups) > 1)
        # The legend under the last part, wrapped at the terminal's edge rather than the table's
        # (a narrow table would fold it into a column; a table widened to hold it spreads out).
        if self.table.caption:
            yield Text.from_markup(self.table.caption, style="table.caption")

    def groups(self, console: Any, options: Any) -> list[list[Any]]:
        """The value columns in consecutive groups, each as many as fit the width beside the
        labels (measured as rich lays them out: padding and the space between columns)."""
        from rich.measure import Measurement

        groups: list[list[Any]] = [[]]
        for column in self.table.columns[self.LABEL_COLUMNS:]:
            trial = self.part(groups[-1] + [column], fold_labels=True)
            natural = Measurement.get(console, options.update_width(10_000), trial).maximum
            if groups[-1] and natural > options.max_width:
                groups.append([])
            groups[-1].append(column)
        return groups

    def part(self, group: list[Any], fold_labels: bool) -> Any:
        from copy import copy
        from dataclasses import replace

        part = copy(self.table)
        # Each column at its new position (rich pads a column by its index) with its cells.
        part.columns = [replace(column, _index=index) for index, column
                        in enumerate(self.table.columns[:self.LABEL_COLUMNS] + group)]
        if fold_labels:
            part.columns[0] = replace(part.columns[0], max_width=self.LABEL_WIDTH)
        part.title = part.caption = None
        return part


def caption(view: TableView) -> str:
    """The table's legend: what a number is, and what its marks say (rich markup)."""
    summaries, marked, flagged = view.summaries, view.tf32_rows, view.flagged_cells
    routine = sum(1 for s in summaries if s.get("warnings")) - flagged
    differing = sum(1 for s in summaries if s.get("answer_differs"))
    return ("geometric mean of the repeat medians, ms/step (the ratios' estimator); "
            "best in green (ties as printed all green); NA = not applicable"
            + (f"; [yellow]![/] {flagged} cell(s) to look at (report.md)" if flagged else "")
            + (f"; {routine} {'more ' if flagged else ''}with warnings of the machine's noise "
               "(one line per kind in report.md)" if routine else "")
            + (f"; {TF32_MARK} TF32 differs between the row's environments (report.md)"
               if marked else "")
            + (f"; [bold red]{DIFFERENT_MARK}[/] {differing} cell(s) computed a different "
               "answer from their row, never best (report.md)" if differing else "")
            + (f"; {EMULATED_MARK} float8 emulated, its time no measure of float8 (report.md)"
               if any(s.get("emulated") for s in summaries) else "")
            + ("; best Keras 3 ÷ HF: the fastest Keras 3 cell of the HF cell's arithmetic "
               "(TF32 or not), its backend named" if view.natives else ""))


def header(name: str) -> str:
    """A column's header: a long name a line per hyphenated or parenthesised part
    ("keras-\\ntensorflow", "Keras 3\\n(PyTorch)\\n(eager)"), so that its column is as wide as
    its numbers."""
    from rich.markup import escape

    if len(name) <= 10:
        return escape(name)
    return escape(re.sub(r"(?<=-)(?=[^-])| (?=\()|(?<=÷) ", "\n", name))


def tables(model: ReportModel, title: str) -> list[Any]:
    """What a run prints at its end: the Keras 3 benchmark table in the study's layout when the
    run has its rows, then every cell."""
    out = []
    if model.keras_table is not None:
        out.append(terminal_table(model.keras_table, f"Keras 3 benchmark table — {title}"))
    first = first_token_table(model)
    if first is not None:
        out.append(first)
    out.append(terminal_table(model.cells_table, title))
    return out


def first_token_table(model: ReportModel):
    """The generate cells' time to first token and decode latency per token (ms), or None."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    cells = [s for s in model.summaries if s["status"] == "ok" and s.get("ttft_ms") is not None]
    if not cells:
        return None
    titles = model.column_titles
    table = Table(title="Generate: time to first token", title_justify="left",
                  caption="ms (geometric means of the repeat medians); decode per token = (ms per "
                          "call − a one-token call with the same prefill) ÷ (tokens − 1) "
                          "(keras-hub: over the call's own buffer; Hugging Face: the first "
                          "token); +1 loop iteration: keras-hub's first token runs one "
                          "iteration of its loop after its prefill",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for name in ("Workload (task)", "Batch", "Environment", "ms per\ncall", "first\ntoken",
                 "decode per\ntoken", "tokens/s"):
        label = name in ("Workload (task)", "Environment")
        table.add_column(name, justify="left" if label else "right", no_wrap=not label,
                         overflow="fold",
                         min_width=14 if label else None)
    for s in cells:
        table.add_row(user_text(s["label"]), str(s["batch_size"]),
                      escape(titles.get(s["cell_id"], s["environment"]))
                      + (" ≠" if s.get("answer_check") == "different work" else ""),
                      fmt(s.get(TIME_KEY)),
                      ttft_text(s), fmt(s.get("decode_ms_per_token")),
                      fmt(s.get("tokens_per_s")))
    return table
