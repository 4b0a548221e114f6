"""Two sides, B against A, cell by cell: the table of `runner ab` (two environments of one run,
measured in pairs) and of an issue-ready report (a control and a treatment, of one run or two).

A side is one environment's records (of one run folder). Cells of the two sides pair by their
name with the environment left out (cnn-fit-keras-b32 and cnn-fit-keras-nightly-b32 are one
row). Per row, nothing here is a statistic of its own: the verdict, its practical threshold and
the detectable change are `compare`'s (comparison.compare_cell: Welch's t on the log repeat
medians, min(n_A, n_B) − 1 degrees of freedom, the smallest change seen with 80 % power), the
ratio B ÷ A and its 95 % interval ratios.welch_ratio's, and the geometric mean of the rows
ratios.geometric_mean_ratio's. What differs between the sides on purpose is not a reason to call
them incomparable: their stacks (comparability.SOFTWARE_KEYS) and the variables each
environment sets its workers (worker_env: an A/B of a flag). The machine, the GPU, the method
version and the timing settings still must agree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import UsageError
from ..data.types import CellSummary, Manifest, Record
from . import comparison, stack_diff
from .comparability import SOFTWARE_KEYS
from .ratios import Ratio, geometric_mean_ratio, welch_ratio
from .stats import repeat_medians
from .summaries import cell_summaries

ON_PURPOSE = (*SOFTWARE_KEYS, "worker_env")


@dataclass(frozen=True)
class Side:
    """One environment of one run: its records, the run's manifest, and a name for the run
    (its id: never a path of this machine)."""

    environment: str
    records: list[Record]
    manifest: Manifest

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.manifest.get("name") or "")


def side(records: Sequence[Record], manifest: Manifest, environment: str) -> Side:
    """The side of `environment` in a run's records; UsageError when it has none."""
    mine = [r for r in records if r["environment"] == environment]
    if not mine:
        found = sorted({r["environment"] for r in records})
        raise UsageError(f"run {manifest.get('run_id') or ''}: no record of environment "
                         f"{environment!r} (it has {', '.join(found) or 'none'})")
    return Side(environment, mine, manifest)


def row_key(record: Record, environment: str) -> str:
    """What pairs a cell with the other side's: its name without its environment."""
    return str(record["cell_name"]).replace(f"-{environment}-", "-", 1)


@dataclass
class PairRow:
    label: str
    batch_size: int | None
    cell_a: str                      # the cells' names
    cell_b: str
    summary_a: CellSummary
    summary_b: CellSummary
    ratio: Ratio                     # B ÷ A, its 95 % interval
    verdict: str                     # faster | slower | same | not comparable
    reason: str
    detectable: float | None         # the smallest change it would have seen (80 % power)
    time_a_ms: float | None
    time_b_ms: float | None
    repeats: tuple[int, int]


@dataclass
class PairTable:
    a: Side
    b: Side
    rows: list[PairRow]
    overall: Ratio                       # the rows' geometric mean of B ÷ A
    stack: list[str]                     # what B's stack changes against A's
    threshold_source: str
    only_a: list[str] = field(default_factory=list)    # cells without a partner
    only_b: list[str] = field(default_factory=list)

    @property
    def slower(self) -> list[PairRow]:
        return [r for r in self.rows if r.verdict == comparison.SLOWER]


def by_row(side: Side) -> dict[str, list[Record]]:
    """A side's records by row, in the order its run's manifest lists the cells (the
    matrix's)."""
    order = {c.get("id"): n for n, c in enumerate(side.manifest.get("cells") or [])}
    out: dict[str, list[Record]] = {}
    for record in sorted(side.records, key=lambda r: (order.get(r["cell_id"], len(order)),
                                                      r["cell_id"], r["repeat"])):
        out.setdefault(row_key(record, side.environment), []).append(record)
    return out


def pair_row(records_a: list[Record], records_b: list[Record], threshold: float,
             alpha: float) -> PairRow:
    summary_a, summary_b = cell_summaries(records_a)[0], cell_summaries(records_b)[0]
    ok_a = [r for r in records_a if r["status"] == "ok"]
    ok_b = [r for r in records_b if r["status"] == "ok"]
    judged = comparison.compare_cell(summary_a, summary_b, ok_a, ok_b, threshold, alpha,
                                     ON_PURPOSE)
    ratio = welch_ratio(repeat_medians(ok_b), repeat_medians(ok_a))
    return PairRow(summary_b["label"], summary_b.get("batch_size"), summary_a["cell_name"],
                   summary_b["cell_name"], summary_a, summary_b, ratio, judged.verdict,
                   judged.reason, judged.detectable, judged.time_a_ms, judged.time_b_ms,
                   (len(repeat_medians(ok_a)), len(repeat_medians(ok_b))))


def pair_table(a: Side, b: Side, threshold: float | None = None,
               alpha: float = comparison.DEFAULT_ALPHA) -> PairTable:
    """B against A, row by row in A's order (the practical threshold as `compare` chooses it:
    --threshold, the machine profiles', else 5 %)."""
    threshold_of, source = comparison.choose_threshold(threshold, a.manifest, b.manifest)
    rows_a, rows_b = by_row(a), by_row(b)
    rows = [pair_row(rows_a[key], rows_b[key], threshold_of(rows_a[key][0].get("workload")),
                     alpha)
            for key in rows_a if key in rows_b
            and any(r["status"] != "not_applicable" for r in rows_a[key] + rows_b[key])]
    installed_a = stack_diff.installed(a.records).get(a.environment, {})
    installed_b = stack_diff.installed(b.records).get(b.environment, {})
    comparable = [r.ratio for r in rows if r.verdict != comparison.NOT_COMPARABLE]
    return PairTable(a, b, rows, geometric_mean_ratio(comparable),
                     stack_diff.changes(installed_a, installed_b), source,
                     [k for k in rows_a if k not in rows_b], [k for k in rows_b if k not in rows_a])


MACHINE_KEYS = ("gpu_name", "gpu_count", "driver_version", "cuda_version", "cudnn_version",
                "cpu_model", "cpu_count", "host_os", "python_version")


def machine(records: Sequence[Record]) -> dict[str, str]:
    """What the records say of the machine they ran on (the first that says each): the GPU,
    its driver, CUDA and cuDNN, the CPU, the operating system and Python; never its name."""
    out: dict[str, str] = {}
    for record in records:
        meta = record.get("metadata") or {}
        for key in MACHINE_KEYS:
            if key not in out and meta.get(key) not in (None, ""):
                out[key] = str(meta[key])
    return out


def machine_text(found: dict[str, str]) -> str:
    """"NVIDIA H200 ×1, driver 570.1, CUDA 12.8; CPU Intel Xeon (16 logical)" or "no GPU; …"."""
    gpu = (f"{found['gpu_name']} ×{found.get('gpu_count', '1')}, driver "
           f"{found.get('driver_version', 'unknown')}"
           + (f", CUDA {found['cuda_version']}" if "cuda_version" in found else "")
           if "gpu_name" in found else "no GPU")
    cpu = f"CPU {found.get('cpu_model', 'unknown')}" + (
        f" ({found['cpu_count']} logical)" if "cpu_count" in found else "")
    return f"{gpu}; {cpu}"
