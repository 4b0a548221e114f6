"""`python -m runner compare RUN_A RUN_B`: did B get faster or slower than A, cell by cell?

The independent unit is the repeat (a fresh process): steps of one process share its state
(allocator, clocks, placement), so pooling them as if independent makes any two runs look
different. Per cell, each repeat is summarised by its median step time, and a change is called
only when two tests agree (asv's rule):
- statistical: Welch's t statistic on the log repeat medians of A and B, with min(n_A, n_B) − 1
  degrees of freedom (ratios.welch_ratio: it holds its level with 3 repeats a side, where
  Welch-Satterthwaite's did not), says they differ (p < alpha);
- practical: the ratio B/A (of the geometric means of the repeat medians) is outside the
  threshold (--threshold; else, when both runs ran on machines with a machine profile, the
  profiles' threshold for the workload class, the larger of the two; else 5 %) *and* outside
  the run-to-run spread of repeat medians on either side (the largest
  max/min of one side's repeat medians): a change smaller than the noise between processes of
  one run is no change.
Cells are paired by name (workload, task, environment, batch size, every non-default axis and
option), not by id: an id also holds the runner's version and the worker's environment
variables, which are exactly what must be shown as differing rather than hide the pairing.
Cells whose comparability metadata or timing settings differ (comparability.py: GPU, driver,
power limit, CUDA, framework version, lock hash, image digest, CPU model, the runner's version,
the worker's and the inherited environment variables, steps, warm-up, min and max time, ...)
or whose timing regimes differ (per-call against blocks on a GPU, a short block) are never
merged into a verdict: they are "not comparable", naming the keys; their test still runs, and a
significant slowdown beyond the threshold makes the exit code 1 all the same. Per-step times
compare across block sizes (calibrated anew in every run: a 2× slower cell gets half the
block), with a note. Cells with fewer than three repeats or too few samples on a side are not
comparable either. A "same" verdict says what it could have
seen: the smallest change detected with 80 % power at the two sides' repeats and spread between
processes, never below the practical margin (power.py: "no change larger than 9.4 % would have
gone unseen").

Per environment, the stack is compared as a whole first (pyperf refuses to mix incomparable
runs): the lock hash or image digest and id, the installed distributions (each one that changed
named: numpy 2.4.6 → 1.26.4), the driver, the GPU model and its power limit, the runner's version
and the environment variables the matrix set. Every row of an environment whose stack differs is
marked, whatever its cells' verdicts.

`--environments ENV_A ENV_B` compares environment ENV_A of run A with ENV_B of run B (the same
run folder may be given twice): two stacks measured side by side, e.g. one framework at two
versions, judged cell by cell as two runs are.

Exit code: 1 when any cell got significantly slower beyond the threshold, judged or not (usable
in CI), else 0; 2 for bad input.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from ...errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, one_line
from ..data.store import Store, open_run
from ..data.types import CellSummary, Manifest, Record
from . import cost, power
from .comparability import (SOFTWARE_KEYS, StackComparison, block_regimes, compare_stacks,
                            differences)
from .ratios import welch_ratio
from .stats import repeat_medians
from .summaries import TIME_KEY, cell_summaries
from .thresholds import DEFAULT_THRESHOLD, choose_threshold  # noqa: F401  (compare's API)

DEFAULT_ALPHA = 0.05
MIN_SAMPLES = 5
MIN_REPEATS = 3          # fewer: no test both holds its level and sees a change (stats)

FASTER, SLOWER, SAME, NOT_COMPARABLE = "faster", "slower", "same", "not comparable"


@dataclass
class CellComparison:
    cell_id: str
    cell_name: str
    label: str
    batch_size: int | None
    environment: str
    verdict: str
    reason: str = ""
    # A's and B's time: the geometric means of the repeat medians (TIME_KEY), the estimator of
    # the ratio beside them and of every table
    time_a_ms: float | None = None
    time_b_ms: float | None = None
    samples_a: int = 0
    samples_b: int = 0
    ratio: float | None = None           # B / A, geometric means of the repeat medians
    p_value: float | None = None         # Welch's t-test on log repeat medians, two-sided
    spread: float | None = None          # run-to-run spread of repeat medians (max/min - 1)
    threshold: float | None = None       # the practical threshold this cell was judged with
    differing_keys: list[str] = field(default_factory=list)
    stack_differs: bool = False          # its environment ran on different stacks in A and B
    # The smallest change the verdict would have seen (80 % power at both sides' repeats and
    # spread between processes, power.py), and never below the practical margin
    detectable: float | None = None
    # Not judged (not comparable), yet significantly slower beyond the threshold and the spread:
    # the exit code is 1 all the same (hidden_change)
    slower_unjudged: bool = False


@dataclass
class Comparison:
    run_a: Path
    run_b: Path
    threshold: float
    alpha: float
    cells: list[CellComparison]
    stacks: list[StackComparison] = field(default_factory=list)
    threshold_source: str = ""           # where the threshold came from (choose_threshold)
    price_ratio: float | None = None     # B's per-GPU list price ÷ A's (cost.price_ratio)

    @property
    def different_stacks(self) -> list[StackComparison]:
        return [s for s in self.stacks if s.differs]

    @property
    def comparable(self) -> list[CellComparison]:
        return [c for c in self.cells if c.verdict != NOT_COMPARABLE]

    @property
    def geometric_mean_ratio(self) -> float | None:
        """Geometric mean of B/A over comparable cells (the one fair average of ratios)."""
        ratios = [c.ratio for c in self.comparable if c.ratio]
        if not ratios:
            return None
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    def count(self, verdict: str) -> int:
        return sum(1 for c in self.cells if c.verdict == verdict)

    @property
    def cost_versus(self) -> str | None:
        """B against A in time and price (cost.versus), where both runs have a price."""
        return cost.versus(self.geometric_mean_ratio, self.price_ratio)

    @property
    def slower_unjudged(self) -> list[CellComparison]:
        """Cells not judged whose test still says significantly slower (exit code 1)."""
        return [c for c in self.cells if c.slower_unjudged]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED_CELLS if self.count(SLOWER) or self.slower_unjudged else EXIT_OK


def readable_records(store: Store, manifest: Manifest | None = None) -> list[Record]:
    """The run's valid records (of the cells its manifest lists); every file that is not one is
    named on stderr (never skipped without a word)."""
    records, unreadable = store.read_records(manifest)
    for path, problem in unreadable:
        print(f"warning: {one_line(f'{path}: {problem}; not compared')}", file=sys.stderr)
    if store.ledger.warning():
        print(f"warning: {one_line(str(store.ledger.warning()))}", file=sys.stderr)
    return records


def paired(records: list[Record], environment: str, label: str, run: Path) -> list[Record]:
    """--environments: the records of one environment, named `label` (environment and cell
    name), so that they pair with the other side's; UsageError when the run has none."""
    out = []
    for record in records:
        if record["environment"] == environment:
            name = str(record["cell_name"]).replace(f"-{environment}-", f"-{label}-", 1)
            renamed = record.copy()
            renamed["environment"], renamed["cell_name"] = label, name
            out.append(renamed)
    if not out:
        found = sorted({r["environment"] for r in records})
        raise UsageError(f"{run}: no record of environment {environment!r} (it has "
                         f"{', '.join(found) or 'none'})")
    return out


def _samples(records: list[Record]) -> list[float]:
    return [s for r in records for s in r.get("samples_ms") or []]


def repeat_test(medians_a: list[float],
                medians_b: list[float]) -> tuple[float | None, float | None, float]:
    """(ratio B/A, two-sided p of Welch's t-test on the logs, run-to-run spread): the ratio and
    test of ratios.welch_ratio (the one used by the effects too, min(n_A, n_B) − 1 degrees of
    freedom), from 3 repeats per side (MIN_REPEATS); with fewer, no p."""
    estimate = welch_ratio(medians_b, medians_a, min_repeats=MIN_REPEATS)
    spread = max(max(m) / min(m) for m in (medians_a, medians_b)) - 1
    return estimate.ratio, estimate.p_value, spread


def compare_cell(summary_a: Mapping[str, Any] | None, summary_b: Mapping[str, Any] | None,
                 records_a: list[Record], records_b: list[Record],
                 threshold: float, alpha: float, compared: tuple[str, ...] = ()) -> CellComparison:
    """B's cell against A's; `compared`: comparability keys that differ on purpose."""
    base = summary_b or summary_a
    if base is None:
        raise ValueError("compare_cell: neither run has the cell")
    out = CellComparison(cell_id=base["cell_id"], cell_name=base["cell_name"], label=base["label"],
                         batch_size=base.get("batch_size"), environment=base["environment"],
                         verdict=NOT_COMPARABLE)
    if summary_a is None or summary_b is None:
        out.reason = f"only in run {'B' if summary_a is None else 'A'}"
        return out
    ok_a = [r for r in records_a if r["status"] == "ok"]
    ok_b = [r for r in records_b if r["status"] == "ok"]
    samples_a, samples_b = _samples(ok_a), _samples(ok_b)
    out.time_a_ms, out.time_b_ms = summary_a.get(TIME_KEY), summary_b.get(TIME_KEY)
    out.samples_a, out.samples_b = len(samples_a), len(samples_b)
    if not ok_a or not ok_b:
        out.reason = f"status A {summary_a['status']}, B {summary_b['status']}"
        return out
    differ = {key: change for key, change in differences(ok_a, ok_b).items()
              if key not in compared}
    out.differing_keys = list(differ)
    medians_a, medians_b = repeat_medians(ok_a), repeat_medians(ok_b)
    out.ratio = welch_ratio(medians_b, medians_a).ratio
    refused, blocks = block_regimes(ok_a, ok_b)
    too_few = _too_few(len(samples_a), len(samples_b), len(medians_a), len(medians_b))
    if differ or refused:
        out.reason = "; ".join(([refused] if refused else []) + (
            ["metadata or settings differ: " + ", ".join(
                f"{key} {change}" for key, change in differ.items())] if differ else []))
        if too_few is None:
            hidden_change(out, medians_a, medians_b, threshold, alpha)
        return out
    if too_few is not None:
        out.reason = too_few
        return out
    flagged = [side for side, s in (("A", summary_a), ("B", summary_b)) if s.get("warnings")]
    notes = [f"caution: warnings in {' and '.join(flagged)} (see report.md)"] if flagged else []
    out.reason = "; ".join(notes + ([blocks] if blocks else []))  # the verdict stands, noted
    out.threshold = threshold
    ratio, p_value, out.spread = repeat_test(medians_a, medians_b)
    if ratio is None or p_value is None:     # two repeats a side, each positive: never here
        return out
    out.ratio, out.p_value = ratio, p_value
    seen = power.estimated_detectable(medians_a, medians_b, alpha=alpha)
    judge(out, ratio, p_value < alpha, threshold, seen)
    return out


def _too_few(samples_a: int, samples_b: int, repeats_a: int, repeats_b: int) -> str | None:
    """Why no test can be made on these sides, or None."""
    if min(samples_a, samples_b) < MIN_SAMPLES:
        return f"too few samples ({samples_a} vs {samples_b}, need {MIN_SAMPLES})"
    if min(repeats_a, repeats_b) < MIN_REPEATS:
        return (f"too few repeats ({repeats_a} vs {repeats_b}, need {MIN_REPEATS} per side: with "
                "fewer, no test both holds its level and sees a change)")
    return None


def hidden_change(out: CellComparison, medians_a: list[float], medians_b: list[float],
                  threshold: float, alpha: float) -> None:
    """A cell that is not judged (its stack, settings or timing regime differ) still carries
    its test: a slowdown significant and beyond both the threshold and the run-to-run spread
    sets `slower_unjudged`, which makes the exit code 1 (a CI gate never passes a 2× slowdown
    because something else changed too)."""
    ratio, p_value, spread = repeat_test(medians_a, medians_b)
    if ratio is None or p_value is None:
        return
    out.p_value, out.spread = p_value, spread
    if p_value < alpha and ratio > 1 + max(threshold, spread):
        out.slower_unjudged = True
        out.reason = (f"slower ×{ratio:.3g} (p={p_value:.2g}, beyond the {threshold * 100:g} % "
                      f"threshold and the run-to-run spread), but not judged: {out.reason}")


def judge(out: CellComparison, ratio: float, significant: bool, threshold: float,
          seen: float | None) -> None:
    """The verdict: slower or faster only when significant and beyond both the threshold and
    the run-to-run spread; a "same" says what it could have seen (`seen`, never below that
    margin)."""
    margin = max(threshold, out.spread or 0.0)
    out.detectable = None if seen is None else max(seen, margin)
    if significant and ratio > 1 + margin:
        out.verdict = SLOWER
    elif significant and ratio < 1 / (1 + margin):
        out.verdict = FASTER
    else:
        out.verdict = SAME
        notes = [out.reason] if out.reason else []
        if significant and abs(math.log(ratio)) > math.log(1 + threshold):
            notes.append(f"within the run-to-run spread ({(out.spread or 0.0) * 100:.0f} %)")
        out.reason = "; ".join(notes + [power.unseen_text(out.detectable)])


def pairing_keys(summaries: list[CellSummary]) -> dict[str, str]:
    """cell id → what pairs it with a cell of the other run: its name (the id only where two
    cells of one run share a name, which a run made from one matrix never has)."""
    names = Counter(s["cell_name"] for s in summaries)
    return {s["cell_id"]: s["cell_name"] if names[s["cell_name"]] == 1
            else f"{s['cell_name']}#{s['cell_id']}" for s in summaries}


def compare_runs(run_a: Path, run_b: Path, threshold: float | None = None,
                 alpha: float = DEFAULT_ALPHA,
                 environments: tuple[str, str] | None = None) -> Comparison:
    if (threshold is not None and not 0 <= threshold < math.inf) or not 0 < alpha < 1:
        raise UsageError(f"--threshold must be ≥ 0 and --alpha in (0, 1) (got {threshold}, "
                         f"{alpha})")
    sides, all_records, manifests = [], [], []
    for index, path in enumerate((run_a, run_b)):
        store, manifest = open_run(path)
        manifests.append(manifest)
        records = readable_records(store, manifest)
        if environments is not None:
            records = paired(records, environments[index], " → ".join(environments), path)
        all_records.append(records)
        summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])])
        key = pairing_keys(summaries)
        by_cell: dict[str, list[Record]] = {}
        for record in records:          # one pass: a run of 10 000 cells is not quadratic
            by_cell.setdefault(record["cell_id"], []).append(record)
        sides.append(({key[s["cell_id"]]: s for s in summaries},
                      {key[s["cell_id"]]: by_cell.get(s["cell_id"], []) for s in summaries}))
    (sum_a, rec_a), (sum_b, rec_b) = sides
    threshold_of, source = choose_threshold(threshold, *manifests)
    stacks = compare_stacks(*all_records)
    differing = {s.environment for s in stacks if s.differs}
    order = list(sum_a) + [name for name in sum_b if name not in sum_a]
    cells = []
    for name in order:
        a, b = sum_a.get(name), sum_b.get(name)
        if all(s is None or s["status"] == "not_applicable" for s in (a, b)):
            continue  # nothing was measured on either side
        side = b if b is not None else a
        workload = side.get("workload") if side is not None else None
        cell = compare_cell(a, b, rec_a.get(name, []), rec_b.get(name, []),
                            threshold_of(workload), alpha, SOFTWARE_KEYS if environments else ())
        cell.stack_differs = cell.environment in differing
        cells.append(cell)
    used = [c.threshold for c in cells if c.threshold is not None]
    return Comparison(run_a, run_b, max(used) if used else threshold_of(None), alpha, cells,
                      stacks, source, cost.price_ratio(*(cost.price_of(m) for m in manifests)))
