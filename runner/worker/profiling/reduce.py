"""A Chrome trace (torch's, JAX's, or TensorFlow's XSpace converted) reduced to one table for every
framework, kernels.json: per profiled step the device's busy time, its idle share and the ops
launched, and one row per op with its category.

Which events are ops:
- on a GPU, kernels and copies: torch's `kernel` / `gpu_memcpy` / `gpu_memset` events, and the
  events of XLA's and TensorFlow's GPU planes (`/device:GPU:N`) on their `Stream #…` lines (the
  kernel level; the `XLA Ops` and `XLA Modules` lines repeat them a level up);
- without one (a CPU run), the host ops: torch's `cpu_op` events, XLA's thunks (an `hlo_op`
  argument) and TensorFlow's kernels (`name:Type`, a `tf_op` argument from the converter),
  each counted by its self time (nested ops are not counted twice). XLA and TensorFlow run ops
  on several threads at once, so their self times can add up to more than the step (JAX's
  categories read 122–130 % of it): where a step's self times exceed its busy time (the union
  of its ops' spans on every thread), each op's time in that step is scaled down to its share
  of the busy time, and `threads_overlap` says by how much they overlapped (1: never).
A step is a step marker's span: torch's `ProfilerStep#N`, or `dl_bench_step` (JAX's
StepTraceAnnotation, TensorFlow's Trace), which the profiled pass puts around every step; an op
belongs to the step its start falls in. Standard library only: the host reads it too.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from .categories import CATEGORIES, category, short_name

SCHEMA = 1
STEP_NAME = "dl_bench_step"
TORCH_STEP = re.compile(r"^ProfilerStep#\d+$")
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU):\d+")
MAX_ROWS = 300              # the slowest ops; the rest are counted in rows_dropped


def names_of(events: Iterable[Mapping[str, Any]]) -> tuple[dict[Any, str], dict[tuple, str]]:
    """The process and thread names of a trace's metadata events."""
    processes: dict[Any, str] = {}
    threads: dict[tuple, str] = {}
    for event in events:
        if event.get("ph") != "M":
            continue
        name = str((event.get("args") or {}).get("name", ""))
        if event.get("name") == "process_name":
            processes[event.get("pid")] = name
        elif event.get("name") == "thread_name":
            threads[(event.get("pid"), event.get("tid"))] = name
    return processes, threads


def is_step_marker(event: Mapping[str, Any]) -> bool:
    name = str(event.get("name", ""))
    return name == STEP_NAME or bool(TORCH_STEP.match(name))


def step_windows(events: list[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) µs of each step marker, in time order."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0.0))
                   for e in events if e.get("ph") == "X" and is_step_marker(e))
    return spans


def is_device_op(event: Mapping[str, Any], processes: Mapping[Any, str],
                 threads: Mapping[tuple, str]) -> bool:
    if event.get("cat") in DEVICE_CATEGORIES:
        return True
    plane = processes.get(event.get("pid"), "")
    line = threads.get((event.get("pid"), event.get("tid")), "")
    return bool(DEVICE_PLANE.match(plane)) and line.startswith("Stream")


def is_host_op(event: Mapping[str, Any], processes: Mapping[Any, str]) -> bool:
    if event.get("cat") == "cpu_op":
        return True
    if DEVICE_PLANE.match(processes.get(event.get("pid"), "")):
        return False
    args = event.get("args") or {}
    return isinstance(args, Mapping) and ("hlo_op" in args or "tf_op" in args)


def op_name(event: Mapping[str, Any],
            fusions: Mapping[tuple[str, str], str] | None = None, *,
            kernel: bool = False) -> str:
    """The row an op is counted in: a device op (`kernel`) by its kernel's name; an XLA thunk by
    its HLO op (a fusion with what it computes where the profile's HLO says: `ynn_fusion.5
    (convolution)`, hlo.py), a TensorFlow kernel by its type, anything else by its event name.
    A GPU kernel keeps its own name because XLA's `hlo_op` on it names what launched it: a
    cuBLAS product's `custom-call.1`, or a CUDA graph's `command_buffer_54` holding thousands of
    kernels of every kind (both read "other" on the H200 of 2026-11-28)."""
    args = event.get("args") or {}
    if kernel:
        return str(event.get("name", ""))
    if isinstance(args, Mapping) and args.get("hlo_op"):
        name = str(args["hlo_op"])
        kind = (fusions or {}).get((str(args.get("hlo_module", "")), name))
        return f"{name} ({kind})" if kind else name
    if isinstance(args, Mapping) and args.get("op_type"):
        return str(args["op_type"])
    return str(event.get("name", ""))


def self_times(ops: list[Mapping[str, Any]]) -> tuple[list[float], list[bool]]:
    """Each op's self time (its duration less that of the ops nested in it on its thread), µs,
    and whether it is top-level (nested in no other op)."""
    order = sorted(range(len(ops)), key=lambda i: (ops[i].get("pid"), ops[i].get("tid"),
                                                   float(ops[i]["ts"]),
                                                   -float(ops[i].get("dur") or 0.0)))
    own = [float(op.get("dur") or 0.0) for op in ops]
    top = [True] * len(ops)
    stack: list[int] = []
    thread: tuple | None = None
    for i in order:
        key = (ops[i].get("pid"), ops[i].get("tid"))
        if key != thread:
            stack, thread = [], key
        start = float(ops[i]["ts"])
        while stack and float(ops[stack[-1]]["ts"]) + float(ops[stack[-1]].get("dur") or 0.0) \
                <= start:
            stack.pop()
        if stack:
            parent = stack[-1]
            own[parent] -= float(ops[i].get("dur") or 0.0)
            top[i] = False
        stack.append(i)
    return [max(0.0, t) for t in own], top


def union_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of intervals, µs."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def reduce_trace(events: list[Mapping[str, Any]], *, source: str,
                 fusions: Mapping[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """kernels.json of a trace's events (see the module's docstring); `fusions`: (module,
    fusion) → what it computes (hlo.fusion_kinds)."""
    processes, threads = names_of(events)
    complete = [e for e in events if e.get("ph") == "X" and "ts" in e]
    windows = step_windows(complete)
    if not windows and complete:             # no marker: the whole trace is one step
        start = min(float(e["ts"]) for e in complete)
        windows = [(start, max(float(e["ts"]) + float(e.get("dur") or 0.0) for e in complete))]
    device_ops = [e for e in complete if is_device_op(e, processes, threads)]
    on_device = bool(device_ops)
    ops = device_ops or [e for e in complete if is_host_op(e, processes)]
    if on_device:
        times, top = [float(e.get("dur") or 0.0) for e in ops], [True] * len(ops)
    else:
        times, top = self_times(ops)
    return tabulate(ops, times, top, windows, source=source, fusions=fusions,
                    device=device_kind(device_ops, processes) if on_device else "cpu",
                    time_basis="kernel time" if on_device else "host self time")


def device_kind(device_ops: list[Mapping[str, Any]], processes: Mapping[Any, str]) -> str:
    plane = processes.get(device_ops[0].get("pid"), "") if device_ops else ""
    return "tpu" if "TPU" in plane else "gpu"


def step_of(start: float, windows: list[tuple[float, float]]) -> int | None:
    for index, (begin, end) in enumerate(windows):
        if begin <= start < end:
            return index
    return None


def tabulate(ops: list[Mapping[str, Any]], times: list[float], top: list[bool],
             windows: list[tuple[float, float]], *, source: str, device: str,
             time_basis: str,
             fusions: Mapping[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """The table: rows by op name over the steps' ops, per-step busy time, idle and launches."""
    steps = max(1, len(windows))
    rows: dict[str, dict[str, list[float]]] = defaultdict(
        lambda: {"count": [0.0] * steps, "us": [0.0] * steps})
    busy: list[list[tuple[float, float]]] = [[] for _ in windows]
    launches = [0] * len(windows)
    for op, own, outermost in zip(ops, times, top, strict=True):
        start = float(op["ts"])
        index = step_of(start, windows)
        if index is None:
            continue
        row = rows[op_name(op, fusions, kernel=device != "cpu")]
        row["count"][index] += 1
        row["us"][index] += own
        if outermost:
            end = min(start + float(op.get("dur") or 0.0), windows[index][1])
            busy[index].append((start, end))
            launches[index] += 1
    per_step, useds = [], []
    for index, (begin, end) in enumerate(windows):
        span = end - begin
        used = union_us(busy[index])
        useds.append(used)
        per_step.append({"step": index, "ms": span / 1000, "busy_us": used,
                         "idle_pct": 100 * (1 - used / span) if span > 0 else None,
                         "launches": launches[index]})
    overlap = scale_to_busy(rows, useds) if device == "cpu" else None
    out = table(rows, per_step, source=source, device=device, time_basis=time_basis)
    out["threads_overlap"] = overlap
    return out


def scale_to_busy(rows: Mapping[str, Mapping[str, list[float]]], busy: list[float]) -> float:
    """Per step, the ops' self times scaled down to the step's busy time where they add up to
    more (ops that ran at once on several threads), in place; the median over the steps of how
    much they overlapped (their sum ÷ the busy time, at least 1)."""
    ratios = []
    for index, used in enumerate(busy):
        summed = sum(row["us"][index] for row in rows.values())
        ratio = summed / used if used > 0 and summed > used * (1 + 1e-6) else 1.0  # not rounding
        ratios.append(ratio)
        if ratio > 1:
            for row in rows.values():
                row["us"][index] /= ratio
    return statistics.median(ratios) if ratios else 1.0


def table(rows: Mapping[str, Mapping[str, list[float]]], per_step: list[dict[str, Any]], *,
          source: str, device: str, time_basis: str) -> dict[str, Any]:
    """kernels.json from rows {name: {count: [per step], us: [per step]}} and the per-step
    figures. Every per-step figure is the median over the steps: the first traced step of a
    profiler often carries its own start-up (torch: 3.8× the next ones seen), and one such step
    must not make the table."""
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    typical = {name: (median(list(row["count"])), median(list(row["us"])))
               for name, row in rows.items()}
    total = sum(us for _, us in typical.values()) or 1.0
    ordered = sorted(typical.items(), key=lambda item: -item[1][1])
    step_count = max((len(row["us"]) for row in rows.values()), default=1)
    by_category: dict[str, list[float]] = {c: [0.0] * step_count for c in CATEGORIES}
    for name, row in rows.items():
        for index, us in enumerate(row["us"]):
            by_category[category(name)][index] += us
    out_rows = [{"name": name, "short": short_name(name), "category": category(name),
                 "device": device, "count_per_step": count, "us_per_step": us,
                 "pct": 100 * us / total} for name, (count, us) in ordered]

    def typical_step(key: str) -> float | None:
        values = [s[key] for s in per_step if s.get(key) is not None]
        return statistics.median(values) if values else None

    categories = {c: median(v) for c, v in by_category.items()}
    return {"schema": SCHEMA, "source": source, "device": device, "time_basis": time_basis,
            "steps": len(per_step), "step_ms": typical_step("ms"),
            "device_busy_us": typical_step("busy_us"),
            "device_idle_pct": typical_step("idle_pct"),
            "launches_per_step": typical_step("launches"),
            "categories": {k: v for k, v in categories.items() if v > 0},
            "per_step": per_step, "rows": out_rows[:MAX_ROWS],
            "rows_dropped": max(0, len(out_rows) - MAX_ROWS)}
