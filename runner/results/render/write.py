"""Every merged output of a run, rewritten from its analysis (analysis/report_model.py
analyse_run: the records read and analysed once, the report model over them), each renderer fed
with the model (renderers never import each other)."""

from __future__ import annotations

import sys
from typing import Any

from ...errors import one_line
from ..analysis.report_model import Profiled, ReportModel, RunAnalysis
from ..data.store import Store
from . import files, markdown


def _warn(message: str) -> None:
    print(f"warning: {one_line(message)}", file=sys.stderr)


def warn_left_out(store: Store, analysed: RunAnalysis) -> None:
    """What the analysis left out of the reports, and why (one line each)."""
    if analysed.ledger_restored:
        _warn(f"{store.ledger.path}: changed while the run ran; written again from the "
              "runner's own copy")
    for path, problem in analysed.unreadable + analysed.calibration_unreadable:
        _warn(f"{path}: {problem}; not in the reports")
    if analysed.ledger_warning:
        _warn(analysed.ledger_warning)
    for problem in analysed.profile_problems:
        _warn(f"{problem}; not in the reports")


def profile_plots_of(store: Store, profiled: Profiled | None, plots: list[Any]) -> None:
    """The profiled rows' plots, where matplotlib works (`plots` drawn)."""
    if profiled is not None and plots:
        try:
            from .plots_profiles import profile_plots

            profiled.plots = profile_plots(store.root, profiled.rows)
        except Exception as exc:  # a plot must never cost the tables
            _warn(f"profile plots not written ({type(exc).__name__}: {exc})")


def scaling_plots_of(store: Store, model: ReportModel) -> list[Any]:
    """The Scaling section's plots (none without data-parallel rows, or without matplotlib)."""
    rows = model.scaling
    if not rows:
        return []
    try:
        from .plots_scaling import scaling_plots

        return scaling_plots(store.root, rows)
    except Exception as exc:  # a plot must never cost the tables
        _warn(f"scaling plots not written ({type(exc).__name__}: {exc})")
        return []


def write_reports(store: Store, analysed: RunAnalysis) -> ReportModel:
    """Rewrite every merged output of a run from its analysis (idempotent), and return the
    report model they show (the terminal's tables show it too). The plots and the HTML page are
    optional extras: when they fail, a warning names why and the rest is kept."""
    warn_left_out(store, analysed)
    model = analysed.report
    store.write_text("results.jsonl", files.results_jsonl(analysed.records))
    store.write_text("summary.csv", files.summary_csv(model.summaries))
    plots: list[Any] = []
    try:
        from .plots import write_plots

        plots = write_plots(store.root, model)
    except Exception as exc:  # a plot must never cost the tables
        _warn(f"plots not written ({type(exc).__name__}: {exc})")
    plots += scaling_plots_of(store, model) if plots else []
    profile_plots_of(store, model.profiled, plots)
    text = markdown.report_markdown(model, plots)
    store.write_text("report.md", text)
    try:
        from . import html

        title = f"Benchmark report: {analysed.manifest.get('name')}"
        store.write_text("report.html", html.render(text, store.root, title=title))
    except Exception as exc:  # idem: the Markdown report is written
        _warn(f"report.html not written ({type(exc).__name__}: {exc})")
    return model
