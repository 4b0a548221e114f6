"""The terminal tables on a narrow terminal: every row keeps its label and every value its
digits, whatever the number of environments."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from runner.results.analysis import summaries as summarize
from runner.results.render import terminal

from tests.results.render.test_reports import record_like
from runner.results.analysis.report_model import table_view

ENVIRONMENTS = ["keras-tensorflow", "keras-jax", "keras-torch", "torch", "jax", "tensorflow",
                "numpy", "keras2", "hf-torch"]


@pytest.fixture
def wide_run():
    """Nine environments, two long row labels, a distinct value in every cell."""
    records = []
    for row, (precision, size) in enumerate([("bfloat16", "tiny"), ("float32", "small")]):
        for column, env in enumerate(ENVIRONMENTS):
            value = 1000 + 10 * row + column
            records.append(record_like(
                cell_id=f"{env}-{row}", environment=env, precision=precision, size=size,
                jit=True, options={"n": 256 * (row + 1)}, samples_ms=[float(value)] * 5))
    return summarize.cell_summaries(records, [r["cell_id"] for r in records])


def printed(table, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 100])
def test_a_table_wider_than_the_terminal_is_split_and_keeps_its_labels(wide_run, width):
    text = printed(terminal.terminal_table(table_view(wide_run), "t"), width)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "…" not in text                                 # no header or number cut short
    for row in range(2):
        for column in range(len(ENVIRONMENTS)):
            assert f"{1000 + 10 * row + column:,}" in text
    parts = text.count("Workload (task)")
    assert parts > 1                                       # nine columns do not fit 100
    # Every part names its rows: the label column is never squeezed away.
    assert text.count("matmul (run)") == 2 * parts


def test_a_table_that_fits_is_printed_whole(wide_run):
    table = terminal.terminal_table(table_view(wide_run), "t")
    text = printed(table, 300)
    assert text.count("Workload (task)") == 1 and text.count("matmul (run)") == 2
    assert [c.header.replace("\n", "") for c in table.columns][2:] == ENVIRONMENTS
    assert "…" not in text


def test_a_narrow_tables_title_is_one_line_above_it():
    """One environment makes a table 30 columns wide: its title, the run's name and folder,
    is not folded into it."""
    records = [record_like(cell_id="c", environment="numpy", samples_ms=[1.0] * 5)]
    title = "user-run (/tmp/results/user-run/20261127T101252Z)"
    view = table_view(summarize.cell_summaries(records, ["c"]))
    text = printed(terminal.terminal_table(view, title), 100)
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == title
    assert lines.index(title) < next(i for i, line in enumerate(lines) if "Workload" in line)
