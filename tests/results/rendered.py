"""The renderers fed as write_reports feeds them, for tests that start from summaries: the
report model built once (runner/results/analysis/report_model.py), then formatted."""

from __future__ import annotations

from typing import Any

from runner.results.analysis.report_model import build
from runner.results.render import markdown, terminal


def report_of(manifest: Any, summaries: list, plots: list | None = None, analysis: Any = None,
              left_out: list | None = None, profiled: Any = None) -> str:
    """report.md of `summaries` (with the effects' `analysis`, where given)."""
    return markdown.report_markdown(build(manifest, summaries, analysis, left_out, profiled),
                                    plots)


def tables_of(summaries: list, title: str) -> list:
    """The terminal's tables of `summaries`."""
    return terminal.tables(build({}, summaries), title)
