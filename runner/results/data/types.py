"""The shapes the results side passes around, typed: a record (one cell × repeat, as stored), a
cell's summary, a run's manifest.

They are TypedDicts: the JSON on disk is exactly these dicts (nothing is converted on the way in
or out, so every file stays byte-identical), and to mypy a mistyped key is an error instead of a
silent None in a table. The record is declared where the worker can read it too
(runner/worker/protocol.py: `Record`, each field's type, bounds, who fills it and what it means,
once); its parts and bounds are re-exported here for the host. A record's type is also its
validation: results/data/schemas.py builds the model that checks a record read from a run
folder from `Record`'s annotations. tests/results/data/test_types.py checks CellSummary and
Manifest against what cell_summaries and build_manifest build, both ways, so a key added in one
place and not the other fails a test.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ...worker.protocol import (MAX_COUNT, MAX_FIGURE, MAX_SAMPLE_MS, MIN_SAMPLE_MS, Bounds,
                                CellCoordinates, Count, Document, Figure, Positive, Record,
                                Sample, StepSummary, Throughput)

__all__ = ["MAX_COUNT", "MAX_FIGURE", "MAX_SAMPLE_MS", "MIN_SAMPLE_MS", "Bounds",
           "CellCoordinates", "CellSummary", "Count", "Document", "Figure", "Manifest",
           "ManifestCell", "Positive", "Record", "Sample", "StepSummary", "Throughput"]


class CellSummary(CellCoordinates, total=False):
    """One cell across its repeats (results/analysis/summaries.py cell_summaries); the report's
    carry its verdicts too (answers.with_checks adds the answer_* and quantization_* checks,
    answers.AnswerCheck; the history keeps them without). What every renderer reads."""

    label: str
    status: str
    error: str | None
    # the repeat as the unit (stats.across_repeats)
    median_ms: float | None
    geomean_ms: float | None
    mean_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    min_ms: float | None
    max_ms: float | None
    stdev_ms: float | None
    repeats_ok: int
    repeats: int
    samples: int
    repeat_medians_ms: list[float]
    cv_repeats: float | None
    iqr_ms: float | None
    median_ci_low_ms: float | None
    median_ci_high_ms: float | None
    # the smallest change against a re-run like this cell that the ratio test detects with 80 %
    # power, at its repeats and spread between processes (analysis/power.py)
    detectable_change: float | None
    cv: float | None
    warnings: list[str]
    warning_groups: dict[str, list[str]]
    # where the time goes, memory, energy
    compile_s: float | None
    import_s: float | None
    setup_s: float | None
    warmup_total_s: float | None
    wall_s: float | None
    train_s: float | None
    calls_per_sample: int | None
    epoch_s: float | None
    epoch_measured_s: float | None
    study_step_ms: float | None
    # generate cells: time to first token and per-token decode latency
    # (results/analysis/decoding.py)
    ttft_ms: float | None
    decode_ms_per_token: float | None
    tokens_per_s: float | None
    ttft_loop_iterations: int | None    # loop iterations a first-token call runs after its prefill
    generate_work: dict[str, int] | None
    items_per_step: float | None
    flops_per_step: float | None
    rss_initial_mb: float | None
    rss_peak_mb: float | None
    vram_initial_mb: float | None
    vram_peak_mb: float | None
    nvml_memory_peak_mb: float | None
    gpu_energy_j: float | None
    energy_per_step_j: float | None
    energy_per_item_j: float | None
    energy_per_step_above_idle_j: float | None
    gpu_idle_power_w: float | None
    energy_note: str | None
    gpu_power_mean_w: float | None
    cpu_util_mean: float | None
    loss_first: float | None
    loss_last: float | None
    accuracy: float | None
    # what ran
    device_name: str | None
    on_gpu: bool
    jit_compile: Any
    # a data-parallel cell's strategy, world size, batches, all-reduce (effective.data_parallel)
    data_parallel: dict[str, Any] | None
    tf32_effective: bool | None
    tf32_paths: dict[str, bool | None] | None
    tf32_detail: dict[str, Any] | None
    allocator: dict[str, Any] | None
    # throughput against the run's measured peak
    items_per_s: float | None
    achieved_tflops: float | None
    peak_kind: str | None
    peak_tflops: float | None
    fraction_of_peak: float | None
    # at the run's list price (cost.py; None without [cost]): what its processes cost, and
    # per 1,000 items (with the time's interval), per million tokens, per epoch, per image
    usd: float | None
    usd_per_1k_items: float | None
    usd_per_1k_items_low: float | None
    usd_per_1k_items_high: float | None
    usd_per_1m_tokens: float | None
    usd_per_epoch: float | None
    usd_per_image: float | None
    peak_note: str | None           # above 100 % of the peak: why (peaks.over_peak_note)
    # the same-answer check (answers.py)
    answer: Any
    answer_note: str | None
    answer_check: str | None
    answer_reference: str | None
    answer_detail: str
    answer_differs: bool
    # the quantized tier (analysis/quantized.py, quantized_check.py): what ran, model bytes
    # before and after, the error against the cell's own float model and its verdict, the
    # float cell of its row and environment and the check of its answer against that one's
    quantization: dict[str, Any] | None
    emulated: bool
    quantization_check: str | None
    quantization_detail: str
    quantization_base: str | None
    quantization_base_check: str


class ManifestCell(TypedDict, total=False):
    id: str
    name: str
    environment: str
    repeats: int
    not_applicable: str | None
    check_answers: bool


class Manifest(TypedDict, total=False):
    """manifest.json of a run folder (runner/run/manifest.py lays it out)."""

    schema: int
    name: str
    run_id: str
    runner_version: str
    matrix: str
    matrix_sha256: str
    profile: str
    profile_reason: str
    executor: str
    executor_reason: str
    flavour: str
    flavour_reason: str
    parallel: dict[str, Any]
    gpu_clocks: dict[str, Any] | None
    machine_profile: dict[str, Any] | None
    started_at: str
    host: dict[str, Any]
    environments: dict[str, dict[str, Any]]
    workloads: dict[str, dict[str, Any]]
    report: dict[str, Any]
    cells: list[ManifestCell]
    ledger: dict[str, Any]           # the run keeps ledger.jsonl: its file, what it vouches for
    # added as the run goes on
    calibration: dict[str, Any] | None
    finished_at: str
    interrupted: bool
    stopped: str
    reproduces: str
    blocks_from: dict[str, Any]      # --blocks-from: {run, cells}
    resumed: list[dict[str, Any]]    # each resume: when, with which executor
    cost: dict[str, Any] | None      # price, estimate, caps, what it spent (runner/cost/)
    stopped_by: str                  # "budget" | "max_hours": a cap stopped the run
    # per tuned cell's id: its knobs and where they came from (runner/run/tiers.py)
    tuning: dict[str, dict[str, Any]]
