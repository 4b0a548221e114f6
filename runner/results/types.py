"""The shapes the results side passes around, typed: a record (one cell × repeat, as stored), a
cell's summary, a run's manifest.

They are TypedDicts: the JSON on disk is exactly these dicts (nothing is converted on the way in
or out, so every file stays byte-identical), and to mypy a mistyped key is an error instead of a
silent None in a table. One place still defines each: the record's fields are RECORD_FIELDS
(runner/worker/protocol.py) and the matrix axes come from the catalog; tests/results/test_types.py
checks these types against them, and against what cell_summaries and build_manifest build, both
ways, so a field added in one place and not the other fails a test.

Values are typed where the renderers rely on them; `Any` where a field holds a nested document
(options, metadata, extra) or a value whose type depends on the axis or the worker.
"""

from __future__ import annotations

from typing import Any, TypedDict



class CellCoordinates(TypedDict):
    """Which cell: what a record and a summary of it both carry."""

    cell_id: str
    cell_name: str
    environment: str
    api: str | None
    backend: str | None
    image: str | None
    workload: str
    task: str
    batch_size: int
    precision: Any
    jit: Any
    size: Any
    tf32: Any
    steps_per_execution: Any
    data: Any
    device: Any
    options: dict[str, Any]
    # A user workload's spec entry (name, file, sha256, option defaults, ...); None: built-in.
    user_workload: dict[str, Any] | None


class Record(CellCoordinates):
    """One cell × repeat as stored (cells/<cell>-r<repeat>.json, results.jsonl): every field of
    RECORD_FIELDS, None where unknown (Store.read_records completes a record read back)."""

    schema: int
    status: str
    error: str | None
    run_id: str | None
    repeat: int
    steps: Any
    warmup_steps: Any
    seed: Any
    min_time_s: Any
    max_time_s: Any
    calibration_sizes: Any
    calls_per_sample: int | None
    harness_overhead: Any
    samples_ms: list[float]
    steps_per_call: int | None
    block_source: str | None
    timing: Any
    outliers: Any
    epoch_boundary_samples: Any
    import_s: float | None
    setup_s: float | None
    compile_s: float | None
    compile_cache: Any
    compilations: Any
    warmup_s: list[float] | None
    train_s: float | None
    worker_s: float | None
    items_per_step: float | None
    rss_initial_mb: float | None
    rss_peak_mb: float | None
    vram_initial_mb: float | None
    vram_peak_mb: float | None
    vram_source: str | None
    nvml_memory_peak_mb: float | None
    allocator: dict[str, Any] | None
    gpu_util_mean: float | None
    gpu_power_mean_w: float | None
    gpu_energy_j: float | None
    gpu_idle_power_w: float | None
    gpu_energy_resolution_s: float | None
    gpu_sm_clock_mhz: float | None
    gpu_sm_clock_min_mhz: float | None
    gpu_mem_clock_mhz: float | None
    gpu_mem_clock_min_mhz: float | None
    gpu_other_processes: Any
    gpu_clock_events: Any
    host_gpu: Any
    cpu_util_mean: float | None
    host_other_cpu: Any
    settle: Any
    flops_per_step: float | None
    loss_first: float | None
    loss_last: float | None
    accuracy: float | None
    answer: Any
    extra: Any
    effective: Any
    metadata: Any
    distributions: Any
    returncode: int | None
    wall_s: float | None
    log: str | None
    median_ms: float | None
    mean_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    min_ms: float | None
    max_ms: float | None
    stdev_ms: float | None
    items_per_s: float | None
    achieved_tflops: float | None


class CellSummary(CellCoordinates, total=False):
    """One cell across its repeats (results/summaries.py cell_summaries), then checked for the
    same answer (answers.check adds the answer_* keys). What every renderer reads."""

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
    # generate cells: time to first token and per-token decode latency (results/decoding.py)
    ttft_ms: float | None
    decode_ms_per_token: float | None
    tokens_per_s: float | None
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
    # the same-answer check (answers.py)
    answer: Any
    answer_note: str | None
    answer_check: str | None
    answer_reference: str | None
    answer_detail: str
    answer_differs: bool


class ManifestCell(TypedDict, total=False):
    id: str
    name: str
    environment: str
    repeats: int
    not_applicable: str | None
    check_answers: bool


class Manifest(TypedDict, total=False):
    """manifest.json of a run folder (results/manifest.py lays it out)."""

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
    # added as the run goes on
    calibration: dict[str, Any] | None
    finished_at: str
    interrupted: bool
    stopped: str
    reproduces: str
    resumed: list[dict[str, Any]]    # each resume: when, with which executor
