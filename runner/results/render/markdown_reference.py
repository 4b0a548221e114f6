"""The sections of report.md that set the run beside figures from elsewhere: the published
study's table (analysis/reference.py) and the peak the run's calibration measured
(results/render/markdown.py puts them in order)."""

from __future__ import annotations

from typing import Any

from ..analysis.report_model import REFERENCE_COLUMNS, REFERENCE_TITLES, published_table
from ..data.types import Manifest
from ..formatting import fmt, md_text


def published_section(beside: list[dict[str, Any]]) -> list[str]:
    """The run beside the published table (reference.beside's rows)."""
    if not beside:
        return []
    table = published_table()
    out = [f"## Beside the published figures ({table['hardware']}, ms/step)", "",
           "| Workload (task) | Batch size | " + " | ".join(
               f"{REFERENCE_TITLES[c]}: here / published" for c in REFERENCE_COLUMNS) + " |",
           "|---|---:|" + "---:|" * len(REFERENCE_COLUMNS)]
    for row in beside:
        cells = []
        for column in REFERENCE_COLUMNS:
            c = row["columns"][column]
            published = fmt(c["published_ms"]) if c["published_ms"] else "NA"
            here = fmt(c["measured_ms"]) if c["measured_ms"] is not None else \
                md_text(c["status"] or "–")
            ratio = f" ({fmt(c['ratio'])}×)" if c["ratio"] is not None else ""
            cells.append(f"{here} / {published}{ratio}")
        out.append(f"| {md_text(row['workload'])} ({md_text(row['task'])}) | {row['batch_size']} | "
                   + " | ".join(cells) + " |")
    return out + ["", "Published: the Keras 3 benchmark study's Table 2 "
                  f"(source: {table['source']}). Hardware, versions and weights differ (random "
                  "weights here): read ranks and ratios, not absolute values. Here: the time per "
                  "step of the tables, except Stable Diffusion predict, timed as the study timed "
                  "it — (T(N+2 steps) − T(2 steps)) / N, without the text encoders and the VAE "
                  "decode — after each repeat's window. The ratio here ÷ published is shown only "
                  "for cells that ran at full size on a GPU.", ""]


def peak_section(manifest: Manifest) -> list[str]:
    calibration = manifest.get("calibration") or {}
    if not calibration.get("peaks"):
        return []
    out = ["## Measured peak", "",
           "| Device | Precision | TFLOP/s | p10–p90 TFLOP/s | Environment | n |",
           "|---|---|---:|---:|---|---:|"]
    out += [f"| {md_text(p['device'])} | {md_text(p['kind'])} | {fmt(p['tflops'], 4)} | "
            f"{fmt(p.get('tflops_p10'), 4)}–{fmt(p.get('tflops_p90'), 4)} | "
            f"{md_text(p['environment'])} "
            f"| {p.get('n')} |" for p in calibration["peaks"]]
    return out + ["", f"How: {md_text(calibration.get('method'))}.", ""]
