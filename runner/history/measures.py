"""The one place the history reads the statistics module (runner.results.analysis.stats, through
the run summaries and the comparison): a cell's headline figures from its summary (a run's
summaries are its analysis's: report_model.analyse_run), a repeat's median, and the verdict of
two sets of repeats. Nothing here computes a statistic of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results.analysis import comparison
from ..results.analysis.summaries import cell_summaries
from ..results.data.records import summarize
from ..results.data.types import CellSummary, Record

# Metadata a bisect step differs in on purpose (it is a different stack): left out before the
# comparison, which would otherwise refuse to compare two stacks.
STACK_METADATA = ("lock_sha256", "image_id", "image_digest", "distributions_sha256",
                  "framework_version", "backend_version", "keras_version", "jaxlib_version",
                  "tensorflow_version", "python_version")


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The figures a series plots: centre, its interval, the repeats behind it."""
    return {"median_ms": summary.get("median_ms"),
            "ci_low_ms": summary.get("median_ci_low_ms"),
            "ci_high_ms": summary.get("median_ci_high_ms"),
            "mean_ms": summary.get("mean_ms"),
            "cv": summary.get("cv"),
            "repeat_medians_ms": summary.get("repeat_medians_ms") or [],
            "warnings": summary.get("warnings") or [],
            "repeats": summary.get("repeats"), "repeats_ok": summary.get("repeats_ok"),
            "samples": summary.get("samples")}


def repeat_median(record: Mapping[str, Any]) -> float | None:
    return summarize(record.get("samples_ms") or [])["median_ms"]


def compare_repeats(records_a: Sequence[Record], records_b: Sequence[Record],
                    threshold: float = comparison.DEFAULT_THRESHOLD,
                    alpha: float = comparison.DEFAULT_ALPHA) -> comparison.CellComparison:
    """`compare`'s verdict on one cell measured twice (A the reference), the stacks' own
    metadata set aside: faster, slower, same or not comparable, with the ratio B/A and p."""
    def plain(records: Sequence[Record]) -> list[Record]:
        out = []
        for record in records:
            stripped = record.copy()
            stripped["metadata"] = {k: v for k, v in (record.get("metadata") or {}).items()
                                    if k not in STACK_METADATA}
            out.append(stripped)
        return out

    a, b = plain(records_a), plain(records_b)
    summary_a, summary_b = (cell_summaries(side)[0] if side else None for side in (a, b))
    if summary_a and summary_b:  # the same cell measured in two stacks: one identity
        summary_b = CellSummary(**{**summary_b, "cell_id": summary_a["cell_id"]})
    return comparison.compare_cell(summary_a, summary_b, a, b, threshold, alpha)


SLOWER, FASTER, SAME = comparison.SLOWER, comparison.FASTER, comparison.SAME
