"""Strings from a price table in report.md: the VM's instance, region and provider, the table's
name and date reach the Cost section through the same Markdown escaping as a user's values (and
the Cost tables' rows and columns too), so that a CommonMark viewer (and report.html) shows them
as text, never as a tag, a link or a broken table. The cells run in this interpreter (NumPy's
selftest)."""

from __future__ import annotations

import csv

from markdown_it import MarkdownIt

from runner.cost.prices import COLUMNS
from tests.hostile.test_hostile_round4 import assert_inert, no_host_history_url  # noqa: F401
from tests.hostile.test_hostile_runs import hostile_matrix, main, no_process_left_behind  # noqa: F401

INSTANCE = "a|b <img src=x onerror=alert(1)>"
REGION = "<script>alert(2)</script>"
PROVIDER = "[x](javascript:alert(3))"
MARKER = "c|d <img src=y onerror=alert(4)>"          # a user's value: in every row's label


def test_a_price_tables_strings_are_text_in_the_cost_section(tmp_path, capsys):
    table = tmp_path / "prices <img src=x>.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerow([INSTANCE, 8, 61, "V100", 1, REGION, 3.06, "", PROVIDER,
                         "2026-11-01", "<b>hand</b>"])
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(1.0, repeats=1, options={"marker": MARKER}, tables={
        "cost": {"instance": INSTANCE, "price_table": str(table)}}))
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    assert code == 0, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    markdown = (run / "report.md").read_text()
    assert "## Cost" in markdown
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    for page in (rendered, (run / "report.html").read_text()):
        assert "<script" not in page
        assert_inert(page, f"{PROVIDER.lower()} {INSTANCE} {REGION}", "prices <img src=x>.csv",
                     f"marker={MARKER}")
