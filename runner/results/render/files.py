"""The machine-readable outputs: results.jsonl (every record) and summary.csv (one row per cell)."""

from __future__ import annotations

from typing import Any
import csv
import io
import json

from ..analysis.report_model import AXIS_KEYS
from ..data.types import CellSummary, Record

CSV_COLUMNS = ("cell_id", "cell_name", "environment", "api", "backend", "workload", "task",
               "batch_size", *AXIS_KEYS, "status", "repeats", "repeats_ok", "geomean_ms", "median_ms", "mean_ms",
               "p10_ms", "p90_ms", "min_ms", "max_ms", "stdev_ms", "samples", "iqr_ms",
               "median_ci_low_ms", "median_ci_high_ms", "cv", "cv_repeats", "import_s", "setup_s",
               "compile_s", "wall_s",
               "train_s", "epoch_s", "epoch_measured_s", "study_step_ms", "ttft_ms",
               "decode_ms_per_token", "tokens_per_s", "items_per_s", "achieved_tflops",
               "device_name",
               "tf32_effective", "peak_kind", "peak_tflops",
               "fraction_of_peak", "rss_initial_mb",
               "rss_peak_mb", "vram_initial_mb", "vram_peak_mb", "nvml_memory_peak_mb",
               "gpu_energy_j", "energy_per_step_j", "energy_per_item_j",
               "energy_per_step_above_idle_j", "gpu_idle_power_w", "energy_note",
               "gpu_power_mean_w", "cpu_util_mean", "usd", "usd_per_1k_items",
               "usd_per_1k_items_low", "usd_per_1k_items_high", "usd_per_1m_tokens",
               "usd_per_epoch", "usd_per_image", "loss_first", "loss_last",
               "accuracy", "answer_check", "answer_reference", "answer_detail",
               # the quantized tier (analysis/quantized.py): empty for float cells
               "quantization_check", "quantization_detail", "quantization_base",
               "model_bytes_before", "model_bytes_after", "quantization_top1_agreement",
               "quantization_max_abs_error", "quantization_relative_error", "emulated",
               "warnings", "error")


def summary_csv(summaries: list[CellSummary]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for summary in summaries:
        row: dict[str, Any] = dict(summary)
        if row.get("error"):
            row["error"] = row["error"].splitlines()[0][:300]
        row["warnings"] = "; ".join(row.get("warnings") or [])
        quantization = row.get("quantization") or {}
        error = quantization.get("error") or {}
        row.update(model_bytes_before=quantization.get("model_bytes_before"),
                   model_bytes_after=quantization.get("model_bytes_after"),
                   quantization_top1_agreement=error.get("top1_agreement"),
                   quantization_max_abs_error=error.get("max_abs_error"),
                   quantization_relative_error=error.get("relative_error"))
        writer.writerow(row)
    return buffer.getvalue()


def results_jsonl(records: list[Record]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)
