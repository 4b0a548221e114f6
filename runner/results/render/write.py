"""Every merged output of a run, rewritten from its cell records: summaries first, then the
report model (analysis/report_model.py: the analysis, once), then each renderer fed with it
(renderers never import each other)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from ...errors import one_line
from ..analysis import answers, cost, effects, stack_diff
from ..analysis.report_model import ReportModel, build
from ..analysis.summaries import cell_summaries
from ..analysis.profiles import Profiled, rows_of
from ..data.profiles import read_profiles
from ..data.store import Store
from ..data.types import Manifest
from . import files, markdown


def _warn(message: str) -> None:
    print(f"warning: {one_line(message)}", file=sys.stderr)


def profiled_of(store: Store) -> Profiled | None:
    """The run's profiles by row (none: no profile)."""
    found, problems = read_profiles(store.root, store.ledger)
    for problem in problems:
        _warn(f"{problem}; not in the reports")
    if not found:
        return None
    return Profiled(rows_of(found), failed=[p for p in found if p.get("status") != "ok"])


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


def write_reports(store: Store, manifest: Manifest) -> ReportModel:
    """Rewrite every merged output of a run from its cell records (idempotent), and return the
    report model they show (the terminal's tables show it too). The plots and the HTML page are
    optional extras: when they fail, a warning names why and the rest is kept."""
    if store.ledger.restore():
        _warn(f"{store.ledger.path}: changed while the run ran; written again from the "
              "runner's own copy")
    records, unreadable = store.read_records(manifest)
    calibration = store.calibration(create=False)
    if calibration.cells.is_dir():          # verified like the cells, never in the tables
        unreadable += calibration.read_records()[1]
    for path, problem in unreadable:
        _warn(f"{path}: {problem}; not in the reports")
    if store.ledger.warning():
        _warn(str(store.ledger.warning()))
    summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])],
                               (manifest.get("calibration") or {}).get("peaks"),
                               manifest.get("machine_profile"), cost.price_of(manifest))
    answers.check(summaries, answers.unchecked_cells(manifest))
    analysis = effects.analyse(summaries, effects.Settings.from_manifest(
        manifest, stack_diff.installed(records)))
    store.write_text("results.jsonl", files.results_jsonl(records))
    store.write_text("summary.csv", files.summary_csv(summaries))
    left_out = [(str(path.relative_to(store.root)), why) for path, why in unreadable]
    model = dataclasses.replace(build(manifest, summaries, analysis, left_out, profiled_of(store)),
                                ledger_fault=store.ledger.fault())
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

        title = f"Benchmark report: {manifest.get('name')}"
        store.write_text("report.html", html.render(text, store.root, title=title))
    except Exception as exc:  # idem: the Markdown report is written
        _warn(f"report.html not written ({type(exc).__name__}: {exc})")
    return model
