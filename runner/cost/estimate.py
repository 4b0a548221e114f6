"""How long a run will take (and, with a price, what it will cost) before anything runs: low,
expected and high wall time of each part, and where each figure came from.

- a cell × repeat (one worker process): from the history database, the same cell on the same
  device model (its recent runs); else a cell of the same workload, task, size and API — on this
  device as it is, on another scaled by the two devices' ratio over the cells both ran (unscaled,
  with a wider interval, when they share none); else a default per workload family; never
  beyond the cell's timeout;
- an environment to build: none when it is ready; else from the build logs of the environments
  built before on this machine (their time per package × its lock's packages); else a minute;
- the calibration: none for a peak the machine's cache holds; else the time the cache recorded
  for it, else a default;
- a profiled pass (after the cells: [profiling] cells, --profile-cells): one worker process of
  its cell, found as a cell × repeat is (a profiled pass builds and warms the cell as a repeat
  does, then runs a few steps three times); the passes run one at a time, alone.

The run's total is the builds, then the calibration, then the cells packed into its lanes as
the scheduler runs them (packed: in plan order, a data-parallel cell holding its devices' lanes
at once, a CPU cell on a GPU host all of them). The interval is wide on purpose: it says how
much the figure can be trusted, not a statistic. The profiled passes come last."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


# Seconds of one worker process by workload family, where the history knows nothing like it
# (docs/gpu-check.md and the CPU smoke runs: 6–33 s a process). A layer cell is one layer's
# import, set-up and a short window: 1.8–5.4 s a process on the quiet 2-core VM (median per
# environment, examples/layers.toml, 2026-11-28), where the model family's 30 s planned that
# example's 12 minutes as 58.
FAMILY_DEFAULT_S = {"diagnostic": 3.0, "ops": 12.0, "model": 30.0, "hub": 45.0, "user": 30.0,
                    "layer": 4.0}
DEFAULT_S = 30.0
# ... at the full size; the smaller presets' processes are shorter (a tiny matmul process took
# 4 s and a tiny CNN 6–15 s on this project's 2-core VMs, 2026-11-27)
SIZE_FACTOR = {"full": 1.0, "small": 0.6, "tiny": 0.4}
BUILD_DEFAULT_S = 60.0          # an environment from its lock, cold (FACTS: 54–105 s on 2 cores)
# A calibration process: the H200 check's 38–42 s on a GPU (at least 3 s a size, two passes);
# on a CPU the largest sizes are not timed (a step over 1 s): 41 s for 8 on this project's VMs.
CALIBRATION_DEFAULT_S = {"gpu": 40.0, "cpu": 6.0}
RECENT = 5                      # runs of the same cell that count
MAX_SECONDS = 7 * 24 * 3600.0   # a time beyond a week (the longest timeout) is no time

# A cell that ran before, as the history keeps it (runner/history/times.py reads them).
@dataclass(frozen=True)
class PastCell:
    cell_id: str
    cell_name: str
    environment: str
    workload: str | None
    task: str | None
    api: str | None
    size: str | None
    batch_size: int | None
    device: str | None       # the GPU model it ran on, or the CPU model for a CPU cell
    wall_s: float            # one worker process: the median over the run's ok repeats
    started_at: str


HERE, LIKE_HERE, SCALED, UNSCALED, DEFAULT = (
    "history: this cell on this device", "history: a like cell on this device",
    "history: a like cell elsewhere, scaled", "history: a like cell elsewhere, unscaled",
    "default per workload family")
SHORT = {HERE: "history here", LIKE_HERE: "like cells here", SCALED: "scaled from elsewhere",
         UNSCALED: "unscaled from elsewhere", DEFAULT: "default", "build logs": "build logs",
         "cached peak": "cached", "last calibration here": "as last time here"}


@dataclass(frozen=True)
class Span:
    """Low, expected and high seconds."""

    low: float = 0.0
    expected: float = 0.0
    high: float = 0.0

    def __add__(self, other: Span) -> Span:
        return Span(self.low + other.low, self.expected + other.expected, self.high + other.high)

    def scaled(self, factor: float) -> Span:
        return Span(self.low * factor, self.expected * factor, self.high * factor)

    def capped(self, limit: float) -> Span:
        return Span(min(self.low, limit), min(self.expected, limit), min(self.high, limit))

    @classmethod
    def around(cls, value: float, low: float, high: float) -> Span:
        return cls(value * low, value, value * high)


def total(spans: Sequence[Span]) -> Span:
    out = Span()
    for span in spans:
        out = out + span
    return out


@dataclass
class Estimate:
    entries: dict[str, Span]                # entry key (cell-r<k>) → one worker process
    cells: Span
    builds: Span
    calibration: Span
    lanes: int
    sources: dict[str, Counter] = field(default_factory=dict)   # part → source → count
    widths: dict[str, int] = field(default_factory=dict)        # entry key → lanes it holds
    # The profiled passes, one at a time after the cells: entry key → one worker process
    profile_entries: dict[str, Span] = field(default_factory=dict)

    @property
    def profiles(self) -> Span:
        return total(list(self.profile_entries.values()))

    @property
    def total(self) -> Span:
        return self.builds + self.calibration + self.cells + self.profiles

    def entry(self) -> dict[str, Any]:
        """The manifest's cost.estimate (seconds; the sources counted)."""
        return {"seconds": span_entry(self.total), "cells_s": span_entry(self.cells),
                "builds_s": span_entry(self.builds),
                "calibration_s": span_entry(self.calibration),
                "profiles_s": span_entry(self.profiles), "profiled": len(self.profile_entries),
                "runs": len(self.entries), "lanes": self.lanes,
                "sources": {part: dict(counts) for part, counts in self.sources.items()}}


def span_entry(span: Span) -> dict[str, float]:
    return {"low": round(span.low, 1), "expected": round(span.expected, 1),
            "high": round(span.high, 1)}


def seconds(value: Any) -> bool:
    """Whether `value` is a time an estimate may use: a finite number of seconds above 0 and
    at most a week."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        0 < value <= MAX_SECONDS


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def packed(jobs: Sequence[tuple[Span, int]], lanes: int) -> Span:
    """The wall time of `jobs` ((one process's span, the lanes it holds) in plan order) run as
    scheduling.Lanes runs them: each starts once as many lanes as it holds are free, never
    before the one planned ahead of it (the first waiting entry holds the others back, so a
    wide cell is never starved)."""
    return Span(*(_makespan([(getattr(span, part), width) for span, width in jobs], lanes)
                  for part in ("low", "expected", "high")))


def _makespan(jobs: Sequence[tuple[float, int]], lanes: int) -> float:
    free = [0.0] * max(1, lanes)        # when each lane is next free
    floor = 0.0                         # when the job before started: none starts earlier
    for seconds, width in jobs:
        width = min(max(1, width), len(free))
        free.sort()
        floor = max(floor, free[width - 1])
        free[:width] = [floor + seconds] * width
    return max(free)


def device_ratio(past: Sequence[PastCell], here: str | None, there: str | None) -> float | None:
    """How much longer a process takes on `here` than on `there`: the median ratio over the
    cells (by name) both devices ran; None when they share none."""
    on: dict[str | None, dict[str, list[float]]] = {here: {}, there: {}}
    for p in past:
        if p.device in on:
            on[p.device].setdefault(p.cell_name, []).append(p.wall_s)
    shared = set(on[here]) & set(on[there])
    if not shared:
        return None
    return _median([_median(on[here][n]) / _median(on[there][n]) for n in sorted(shared)])


def cell_span(cell: Any, device: str | None, past: Sequence[PastCell],
              family: Callable[[str], str]) -> tuple[Span, str]:
    """One worker process of `cell` on `device`, and where the figure came from."""
    same = [p.wall_s for p in past
            if (p.cell_id == cell.id or p.cell_name == cell.name) and p.device == device][:RECENT]
    if same:        # fewer runs, a wider interval: a shared VM swings by 1.5× and more
        span = Span(min(same) * 0.8, _median(same), max(same) * (1.3 if len(same) >= 3 else 1.6))
        return span.capped(cell.timeout), HERE
    size = cell.axes.get("size")
    like = [p for p in past if (p.workload, p.task, p.api, p.size) ==
            (cell.workload, cell.task, cell.api, size)]
    here = [p.wall_s for p in like if p.device == device]
    if here:
        return Span.around(_median(here), 0.6, 1.7).capped(cell.timeout), LIKE_HERE
    if like:
        there = Counter(p.device for p in like).most_common(1)[0][0]
        value = _median([p.wall_s for p in like if p.device == there])
        ratio = device_ratio(past, device, there)
        if ratio is not None:
            return Span.around(value * ratio, 0.5, 2.0).capped(cell.timeout), SCALED
        return Span.around(value, 0.33, 3.0).capped(cell.timeout), UNSCALED
    default = FAMILY_DEFAULT_S.get(family(cell.workload), DEFAULT_S) * SIZE_FACTOR.get(size, 1.0)
    return Span.around(default, 0.3, 3.0).capped(cell.timeout), DEFAULT


@dataclass(frozen=True)
class Build:
    """An environment the run prepares: ready already (True), to build (False) or unknown (None:
    an executor that cannot tell), with its lock's package count where known."""

    label: str
    ready: bool | None
    packages: int | None = None


def build_span(build: Build, logs: Sequence[tuple[float, int | None]]) -> tuple[Span, str]:
    """`logs`: (seconds, packages) of the builds done before on this machine."""
    if build.ready:
        return Span(), "ready"
    if build.ready is None:
        return Span(), "not known (the executor cannot tell whether it is built)"
    per_package = [s / n for s, n in logs if n]
    if per_package and build.packages:
        return Span.around(_median(per_package) * build.packages, 0.6, 2.0), "build logs"
    if logs:
        return Span.around(_median([s for s, _ in logs]), 0.5, 2.5), "build logs"
    return Span.around(BUILD_DEFAULT_S, 0.5, 3.0), "default"


def calibration_span(cached: bool, last_s: float | None, gpu: bool) -> tuple[Span, str]:
    if cached:
        return Span(), "cached peak"
    if last_s is not None:
        return Span.around(last_s, 0.7, 1.5), "last calibration here"
    return Span.around(CALIBRATION_DEFAULT_S["gpu" if gpu else "cpu"], 0.3, 3.0), "default"


def estimate(entries: Sequence[Any], device_of: Callable[[Any], str | None],
             past: Sequence[PastCell] | None, family: Callable[[str], str],
             builds: Sequence[Build] = (), logs: Sequence[tuple[float, int | None]] = (),
             calibrations: Sequence[tuple[bool, float | None]] = (), lanes: int = 1,
             gpu: bool = False, width: Callable[[Any], int] = lambda cell: 1,
             profiles: Sequence[Any] = ()) -> Estimate:
    """The run's estimate: `entries` (plan entries: .cell, .key) to run; `calibrations`: per
    calibration run, (its peak cached, the time it took last); `gpu`: the run has a GPU;
    `width`: the lanes a cell holds at once (run/devices.py width); `profiles`: the profiled
    passes (entries) after the cells. A time that is no time (NaN, infinite, not positive,
    beyond a week: a damaged or shared history, cache or build log) is left out, never taken
    into a figure."""
    past = [p for p in past or () if seconds(p.wall_s)]
    logs = [(s, n) for s, n in logs if seconds(s)]
    calibrations = [(cached, last if seconds(last) else None) for cached, last in calibrations]
    sources: dict[str, Counter] = {"cells": Counter(), "builds": Counter(),
                                   "calibration": Counter(), "profiles": Counter()}
    per_cell: dict[str, tuple[Span, str]] = {}
    spans: dict[str, Span] = {}
    for entry in entries:
        cell = entry.cell
        if cell.id not in per_cell:
            per_cell[cell.id] = cell_span(cell, device_of(cell), past or (), family)
        spans[entry.key], source = per_cell[cell.id]
        sources["cells"][source] += 1
    built = []
    for build in builds:
        span, source = build_span(build, logs)
        built.append(span)
        sources["builds"][source] += 1
    calibrated = []
    for cached, last_s in calibrations:
        span, source = calibration_span(cached, last_s, gpu)
        calibrated.append(span)
        sources["calibration"][source] += 1
    widths = {entry.key: width(entry.cell) for entry in entries}
    cells = packed([(spans[key], widths[key]) for key in spans], lanes)
    profiled: dict[str, Span] = {}
    for entry in profiles:                  # alone, one at a time: each holds every lane
        cell = entry.cell
        if cell.id not in per_cell:
            per_cell[cell.id] = cell_span(cell, device_of(cell), past or (), family)
        profiled[entry.key], source = per_cell[cell.id]
        widths[entry.key] = max(1, lanes)
        sources["profiles"][source] += 1
    return Estimate(spans, cells, total(built), total(calibrated), max(1, lanes), sources, widths,
                    profiled)

