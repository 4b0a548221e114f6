"""A user's strings in Markdown: option values, error messages, names and paths in report.md,
report.html and compare's Markdown, and a price table's strings (the VM's instance, region and
provider, the table's name and date) in the Cost section and its tables, all go through the same
Markdown escaping, so that a CommonMark viewer (and report.html) shows them as text, never as a
tag, a link or a broken table. The cells run in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import csv
import html
import re

import tomli_w
from markdown_it import MarkdownIt

from runner.cost.prices import COLUMNS
from tests.hostile.helpers import HOST_PYTHON, fake_interpreter
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


# --- a user's strings in report.md, report.html and compare's Markdown -----------------------

HOSTILE_VALUE = "a|b <img src=x onerror=alert(1)> [x](javascript:alert(1)) `c` *d* &#106;"


FAILING_WORKER = """
import json, sys
json.dump({"schema": 1, "status": "failed", "error": "boom | <img src=y onerror=alert(2)> "
           "[y](javascript:alert(2)) in " + sys.argv[2]}, open(sys.argv[2], "w"))
"""


def tables_and_text(page: str) -> tuple[list[list[int]], str]:
    """Per HTML table, the cell count of each row (its head first); and the page's text."""
    counts = [[len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table,
                                                                         re.S)]
              for table in re.findall(r"<table>.*?</table>", page, re.S)]
    return counts, html.unescape(re.sub(r"<[^>]+>", "", page))


def assert_inert(page: str, *texts: str) -> None:
    """No tag or link made of a user's string, every row of every table as wide as its head,
    and each string shown as the characters it is."""
    assert "<img src=x" not in page and "<img src=y" not in page
    assert "javascript:" not in "".join(re.findall(r"href=\"[^\"]*\"", page))
    counts, text = tables_and_text(page)
    assert counts and all(len(set(rows)) == 1 for rows in counts), counts
    for expected in texts:
        assert expected in text, expected


def test_a_users_strings_are_escaped_in_every_markdown_context(tmp_path, capsys):
    liar = fake_interpreter(tmp_path, FAILING_WORKER)
    results = tmp_path / "r <img src=x onerror=alert(3)>"
    (tmp_path / "m.toml").write_text(tomli_w.dumps({
        "run": {"name": "hostile", "repeats": 1, "warmup_steps": 1, "steps": 3,
                "profile": "full"},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"},
                         "liar": {"python": str(liar), "api": "numpy"}},
        "benchmarks": [{"workload": "selftest", "environments": ["host", "liar"],
                        "options": {"behaviour": "ok", "sleep_ms": 1.0,
                                    "marker": HOSTILE_VALUE}}]}))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", results)
    assert code == 1, out + err                                  # the liar's cell failed
    (run,) = (results / "hostile").iterdir()
    error = f"boom | <img src=y onerror=alert(2)> [y](javascript:alert(2)) in {run}"
    markdown = (run / "report.md").read_text()
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    assert_inert(rendered, f"marker={HOSTILE_VALUE}]", error)
    assert_inert((run / "report.html").read_text(), f"marker={HOSTILE_VALUE}]", error)
    code, out, err = main(capsys, "compare", run, run, "--markdown", tmp_path / "c.md")
    compared = MarkdownIt("commonmark", {"html": True}).enable("table").render(
        (tmp_path / "c.md").read_text())
    assert_inert(compared, f"marker={HOSTILE_VALUE}]")
