"""Compute efficiency: what arithmetic a cell ran (TF32 or not, on the paths its workload uses),
the device's measured peak per kind of arithmetic, and each cell's fraction of it.

- **TF32 per path.** A framework allows TF32 per path: torch for convolutions (cuDNN, on by
  default) apart from matmuls (off by default), JAX and TensorFlow for both. The worker records
  both paths (`effective.tf32_detail`: matmul, conv); a cell's TF32 state is read from the paths
  its workload's FLOPs run on (the catalog's `dense_paths`): the CNN, SAM and Stable Diffusion
  use convolutions and matmuls, BERT and the LLMs matmuls, elementwise neither (no TF32 question
  at all). The state is on where any of those paths ran TF32 (its arithmetic, and its answer's
  tolerance, are TF32's), off where none did, unknown where a path is not recorded on a GPU.
- **% of peak** only for work bound by dense arithmetic (a workload with dense paths): an
  elementwise step is bound by memory, and its throughput against a matmul peak means nothing
  (the same SELU read 0.125 % for JAX and 1.0 % for torch against different peak kinds).
- **The peak** is measured, never taken from a datasheet: dense matmuls timed by the worker at
  several sizes (runner/worker/__main__.calibrate). Taking the largest of several noisy medians
  is biased upward, so the choice and the figure come from independent timings: the worker picks
  its size by one pass and measures it again in a second; here the environment is picked by its
  first-pass figure and the peak is its second-pass one, with that pass's spread (p10–p90).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...worker.catalog import dense_paths
from ..data.types import CellSummary, Record

PEAK_PRECISION = {"float32": "float32", "bfloat16": "bfloat16", "mixed_bfloat16": "bfloat16",
                  "mixed_float16": "float16"}


def ran_on_gpu(record: Mapping[str, Any]) -> bool:
    """Whether a record computed on a GPU (its framework's device, not merely a GPU present)."""
    meta = record.get("metadata") or {}
    device = (record.get("effective") or {}).get("device")  # "cpu", "cuda:0", "/CPU:0", ...
    on_cpu = device is not None and "cpu" in str(device).lower()
    return bool(meta.get("gpu_name")) and not on_cpu


def device_name(record: Mapping[str, Any]) -> str | None:
    """The device a record computed on: the GPU model when it ran on the GPU, else the CPU's."""
    meta = record.get("metadata") or {}
    return meta["gpu_name"] if ran_on_gpu(record) else meta.get("cpu_model")


def tf32_paths(record: Mapping[str, Any]) -> dict[str, bool | None]:
    """Per dense path the record's workload uses: whether it ran on TF32 (its worker's
    tf32_detail; the matmul path of an older record from effective.tf32); False on a CPU."""
    paths = dense_paths(str(record.get("workload")))
    if not ran_on_gpu(record):
        return dict.fromkeys(paths, False)
    effective = record.get("effective") or {}
    detail = effective.get("tf32_detail")
    detail = detail if isinstance(detail, Mapping) else {}
    out: dict[str, bool | None] = {}
    for path in paths:
        value = detail.get(path)
        if value is None and path == "matmul":
            value = effective.get("tf32")
        out[path] = None if value is None else bool(value)
    return out


def tf32_state(record: Mapping[str, Any]) -> bool | None:
    """Whether the record's dense float32 work ran on TF32 tensor cores on any path its workload
    uses; False where none did (a CPU, a workload with no dense path); None where a GPU record
    does not say for a path and none is known on: unknown, never assumed off."""
    states = list(tf32_paths(record).values())
    if any(state is True for state in states):
        return True
    return False if all(state is False for state in states) else None


def peak_kind(precision: Any, tf32: bool | None, workload: str | None = None) -> str | None:
    """What a peak is measured for: bfloat16, float16, float32, or tf32 (float32 inputs run on
    TF32 tensor cores: a different peak). None for a float32 record whose TF32 state is unknown
    (neither peak applies) and for a workload bound by no dense arithmetic (no peak applies)."""
    if workload is not None and not dense_paths(workload):
        return None
    kind = PEAK_PRECISION.get(precision)
    if kind != "float32":
        return kind
    if tf32 is None:
        return None
    return "tf32" if tf32 else "float32"


def _spread(record: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """TFLOP/s at the record's p90 and p10 step times: the spread of its samples."""
    flops = record.get("flops_per_step")
    slow, fast = record.get("p90_ms"), record.get("p10_ms")
    if not flops or not slow or not fast:
        return None, None
    return flops / (slow / 1000.0) / 1e12, flops / (fast / 1000.0) / 1e12


def peaks_from(records: list[Record]) -> list[dict[str, Any]]:
    """The peak per device and peak kind: [{device, kind, tflops, tflops_p10, tflops_p90, ...}].
    The environment is chosen by its calibration's selection figure (the first pass: its
    `extra.peak.selected_tflops`; a record without one, by its own figure) and the peak is its
    independent second-pass figure (the record's achieved TFLOP/s), so the choice's luck does
    not inflate the peak."""
    best: dict[tuple[Any, Any], tuple[float, dict[str, Any]]] = {}
    for r in records:
        tflops = r.get("achieved_tflops")
        if r.get("status") != "ok" or not tflops:
            continue
        key = (device_name(r), peak_kind(r.get("precision"), tf32_state(r)))
        if key[1] is None:
            continue            # float32 with TF32 unknown: no peak of either kind
        extra = r.get("extra") or {}
        selected = (extra.get("peak") or {}).get("selected_tflops")
        chosen_by = float(selected if selected else tflops)
        if key in best and chosen_by <= best[key][0]:
            continue
        low, high = _spread(r)
        best[key] = (chosen_by, {
            "device": key[0], "kind": key[1], "tflops": tflops,
            "tflops_p10": low, "tflops_p90": high, "selected_tflops": chosen_by,
            "environment": r["environment"], "n": (r.get("options") or {}).get("n"),
            "sizes": extra.get("calibration")})
    return [entry for _, entry in best.values()]


def add_fraction_of_peak(summaries: list[CellSummary],
                         peaks: list[dict[str, Any]] | None = None) -> None:
    """Set peak_tflops and fraction_of_peak on each summary from the run's calibration (the
    manifest's peaks; None without one: never from the cells themselves), for the cells whose
    work is dense arithmetic (their peak_kind says which peak; none for elementwise)."""
    table = {(p["device"], p["kind"]): p for p in peaks or []}
    for s in summaries:
        entry = table.get((s.get("device_name"), s.get("peak_kind")))
        peak = entry["tflops"] if entry else None
        s["peak_tflops"] = peak
        s["fraction_of_peak"] = (s["achieved_tflops"] / peak
                                 if peak and s.get("achieved_tflops") and s["status"] == "ok" else None)
        s["peak_note"] = over_peak_note(s, entry) \
            if entry and (s["fraction_of_peak"] or 0) > 1 else None


OVER_PEAK_MARK = "‼"


def over_peak_note(summary: Mapping[str, Any], peak: Mapping[str, Any]) -> str:
    """Why a cell reads above 100 % of its peak: the peak is a figure the run measured (a matmul
    at the calibration's sizes, in one environment), a floor of what the device does there, not
    its ceiling. Where that environment is not the cell's, the peak came from a slower one."""
    where = f"`{peak.get('environment')}`" + (f" at n = {peak['n']}" if peak.get("n") else "")
    other = peak.get("environment") != summary.get("environment")
    return (f"{OVER_PEAK_MARK} {summary.get('cell_name')}: {summary['fraction_of_peak'] * 100:.0f} "
            f"% of the measured {summary.get('peak_kind')} peak ({peak.get('tflops'):.3g} TFLOP/s, "
            f"measured in {where}" + (", another environment, slower there than this cell's"
                                      if other else ", this cell's own environment, slower at "
                                      "that size or moment")
            + "): the peak is not this device's ceiling, so its % of peak says little.")
