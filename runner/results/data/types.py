"""The shapes the results side passes around, typed: a record (one cell × repeat, as stored), a
cell's summary, a run's manifest.

They are TypedDicts: the JSON on disk is exactly these dicts (nothing is converted on the way in
or out, so every file stays byte-identical), and to mypy a mistyped key is an error instead of a
silent None in a table. A record's type is also its validation: results/data/schemas.py builds the
model that checks a record read from a run folder from `Record`'s annotations, bounds included
(the Annotated figures below). One place still defines each field: the record's fields are
RECORD_FIELDS (runner/worker/protocol.py) and the axes' types come from the catalog;
tests/results/data/test_types.py checks these types against them, and against what cell_summaries
and build_manifest build, both ways, so a field added in one place and not the other fails a
test.

Values are typed where the host relies on them; `Any` where a field holds a nested document
or a value the host takes as it is (those are not validated either).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from pydantic import Field

from ...schema.values import MAX_TIMEOUT_S
from ...worker.protocol import Status

# Bounds of every number the statistics read: a finite number beyond them (1.7e308 ms) makes a
# sum, a square or a ratio of the reports overflow, so such a record is set aside like any other
# malformed one. A step lasts at most a cell's longest timeout and, to count as measured, at
# least a nanosecond; any other figure is at most 1e30 in size (FLOPs per step of the largest
# model and batch are far below; every product and square of two such figures stays finite).
MAX_SAMPLE_MS = MAX_TIMEOUT_S * 1000.0
MIN_SAMPLE_MS = 1e-6
MAX_FIGURE = 1e30
MAX_COUNT = 10**12              # steps per call, calls per sample
Sample = Annotated[float, Field(ge=0.0, le=MAX_SAMPLE_MS)]
Figure = Annotated[float, Field(ge=-MAX_FIGURE, le=MAX_FIGURE)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Positive = Annotated[int, Field(gt=0)]
Document = dict[str, Any]


class CellCoordinates(TypedDict):
    """Which cell: what a record and a summary of it both carry. The axes (task to device)
    have their catalog declaration's type, or None (tests/results/data/test_types.py)."""

    cell_id: str
    cell_name: str
    environment: str
    api: str | None
    backend: str | None
    image: str | None
    workload: str
    task: str
    batch_size: Positive
    precision: str | None
    jit: bool | str | None
    size: str | None
    tf32: bool | None
    steps_per_execution: int | None
    data: str | None
    device: str | None
    devices: int | None
    scaling: str | None
    options: Document
    # A user workload's spec entry (name, file, sha256, option defaults, ...); None: built-in.
    user_workload: Document | None


class StepSummary(TypedDict):
    """A repeat's per-step times summarised (results/data/records.py summarize), ms."""

    median_ms: Figure | None
    mean_ms: Figure | None
    p10_ms: Figure | None
    p90_ms: Figure | None
    min_ms: Figure | None
    max_ms: Figure | None
    stdev_ms: Figure | None


class Throughput(TypedDict):
    """items/s and TFLOP/s at the median step time (results/data/records.py throughput)."""

    items_per_s: Figure | None
    achieved_tflops: Figure | None


class Record(CellCoordinates, StepSummary, Throughput):
    """One cell × repeat as stored (cells/<cell>-r<repeat>.json, results.jsonl): every field of
    RECORD_FIELDS, None where unknown (Store.read_records completes a record read back)."""

    schema: Literal[1]
    status: Status
    error: str | None
    run_id: str | None
    repeat: Positive
    steps: Any
    warmup_steps: Any
    seed: Any
    min_time_s: Any
    max_time_s: Any
    calibration_sizes: Any
    calls_per_sample: Count | None
    harness_overhead: Any
    samples_ms: list[Sample]
    steps_per_call: Count | None
    block_source: str | None
    timing: Any
    outliers: list[Annotated[list[Figure], Field(min_length=2, max_length=2)]] | None  # [i, ms]
    epoch_boundary_samples: Any
    import_s: Figure | None
    setup_s: Figure | None
    compile_s: Figure | None
    compile_cache: Any
    compilations: Any
    warmup_s: list[Figure] | None
    train_s: Figure | None
    worker_s: Figure | None
    items_per_step: Figure | None
    rss_initial_mb: Figure | None
    rss_peak_mb: Figure | None
    vram_initial_mb: Figure | None
    vram_peak_mb: Figure | None
    vram_source: str | None
    nvml_memory_peak_mb: Figure | None
    allocator: Document | None
    gpu_util_mean: Figure | None
    gpu_power_mean_w: Figure | None
    gpu_energy_j: Figure | None
    gpu_idle_power_w: Figure | None
    gpu_energy_resolution_s: Figure | None
    gpu_sm_clock_mhz: Figure | None
    gpu_sm_clock_min_mhz: Figure | None
    gpu_mem_clock_mhz: Figure | None
    gpu_mem_clock_min_mhz: Figure | None
    gpu_other_processes: Any
    gpu_clock_events: Any
    host_gpu: Any
    cpu_util_mean: Figure | None
    host_other_cpu: Any
    settle: Any
    flops_per_step: Figure | None
    loss_first: Figure | None
    loss_last: Figure | None
    accuracy: Figure | None
    answer: Document | None
    extra: Document | None
    profile: Document | None          # a profiled pass's capture; None in every timed record
    profile_pass: Document | None     # a profiled pass's settings; None in every timed record
    effective: Document | None
    metadata: Document | None
    distributions: Document | None
    returncode: int | None
    wall_s: Figure | None
    usd: Figure | None
    log: str | None


class CellSummary(CellCoordinates, total=False):
    """One cell across its repeats (results/analysis/summaries.py cell_summaries), then checked for
    the same answer (answers.check adds the answer_* keys). What every renderer reads."""

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
