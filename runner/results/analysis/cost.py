"""Dollars, from what the records already hold and the price the run's manifest names
(manifest["cost"]["price"], runner/cost/pricing.py): a cell's steady-state cost per item, per
million generated tokens, per epoch and per image at the share of the VM's list price its GPUs
make (gpus_held: a data-parallel cell on 8 GPUs pays for 8), with intervals carried from the
time's; sentences for the findings; what a comparison of two
runs says in price. Every figure is a list-price estimate with the table's date. Cost never
decides a verdict: faster and slower stay the time's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..data.types import CellSummary, Record
from ..formatting import fmt, usd
from .peaks import ran_on_gpu
from .ratios import welch_ratio

KEYS = ("usd", "usd_per_1k_items", "usd_per_1k_items_low", "usd_per_1k_items_high",
        "usd_per_1m_tokens", "usd_per_epoch", "usd_per_image")
TIME_KEY = "geomean_ms"        # summaries.TIME_KEY: the estimator every figure uses


def price_of(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's price entry, or None (no [cost], or a run from before it)."""
    price = (manifest.get("cost") or {}).get("price")
    return price if isinstance(price, dict) and price.get("per_gpu_usd_per_hour") else None


def per_second(price: Mapping[str, Any] | None) -> float | None:
    """USD per second of one GPU's share of the VM."""
    if not price:
        return None
    return float(price["per_gpu_usd_per_hour"]) / 3600.0


def gpus_held(cell: Mapping[str, Any]) -> int:
    """The GPUs a cell (a record or a summary) holds while it runs, as the scheduler gives them
    (run/devices.py width): its `devices` when it computes on GPUs, else one share (a CPU cell
    runs on one lane)."""
    on_gpu = cell["on_gpu"] if "on_gpu" in cell else ran_on_gpu(cell)
    devices = cell.get("devices")
    return int(devices) if on_gpu and isinstance(devices, int) and devices > 1 else 1


def figures(summary: Mapping[str, Any], records: Sequence[Record],
            price: Mapping[str, Any] | None) -> dict[str, Any]:
    """A cell's cost figures (every key, None where it does not apply): each at the share of
    the VM its GPUs make (gpus_held), the processes' `usd` from their wall time at that rate
    (the records' own `usd` without a price)."""
    out: dict[str, Any] = dict.fromkeys(KEYS)
    spent = [r["usd"] for r in records if r.get("usd") is not None]
    out["usd"] = sum(spent) if spent else None
    per_gpu = per_second(price)
    if per_gpu is None:
        return out
    rate = per_gpu * gpus_held(summary)
    walls = [(gpus_held(r), float(wall)) for r in records
             if (wall := r.get("wall_s")) is not None and r.get("status") != "not_applicable"]
    if walls:
        out["usd"] = per_gpu * sum(gpus * seconds for gpus, seconds in walls)
    if summary.get("status") != "ok":
        return out
    step_ms, items = summary.get(TIME_KEY), summary.get("items_per_step")
    if step_ms and items:
        # The time's estimator and its own interval, each priced alike (never the interval
        # scaled by another centre than the one it was made around).
        for key, time_key in (("usd_per_1k_items", TIME_KEY),
                              ("usd_per_1k_items_low", "median_ci_low_ms"),
                              ("usd_per_1k_items_high", "median_ci_high_ms")):
            if summary.get(time_key):
                out[key] = rate * summary[time_key] / items
    decode_ms = summary.get("decode_ms_per_token")
    if summary.get("task") == "generate" and decode_ms and decode_ms > 0 and items:
        # At the decode rate: one loop iteration makes a token per sequence (`items` of them).
        out["usd_per_1m_tokens"] = rate * decode_ms / 1000.0 / items * 1e6
    epoch = summary.get("epoch_measured_s") or summary.get("epoch_s")
    if summary.get("task") == "fit" and epoch:
        out["usd_per_epoch"] = rate * epoch
    if summary.get("workload") == "stable_diffusion" and summary.get("items_per_s"):
        out["usd_per_image"] = rate / summary["items_per_s"]
    return out


def label(price: Mapping[str, Any]) -> str:
    """What the figures are: list-price estimates of which VM, from which table and date."""
    vm = " ".join(str(price[k]) for k in ("provider", "instance", "region") if price.get(k))
    origin = (f"price table {price.get('table', '').rsplit('/', 1)[-1]} of "
              f"{price.get('retrieved_at')}" if price.get("source") == "price table"
              else "the matrix's price_per_hour")
    pricing = str(price.get("pricing", "on_demand")).replace("_", "-")
    return (f"list-price estimates at {usd(price['usd_per_hour'])}/h for {vm or 'the VM'} "
            f"({pricing}; {usd(price['per_gpu_usd_per_hour'])}/h per GPU; {origin})")


# The unit a row is best read in, first found: per image, per token, per epoch, per item.
UNITS = (("usd_per_image", "per image"), ("usd_per_1m_tokens", "per million tokens"),
         ("usd_per_epoch", "per epoch"), ("usd_per_1k_items", "per 1,000 items"))


def unit_of(summary: Mapping[str, Any]) -> tuple[str, str] | None:
    return next(((k, text) for k, text in UNITS if summary.get(k) is not None), None)


def sentences(summaries: Sequence[CellSummary], limit: int = 3) -> list[str]:
    """Per row (workload, task, batch): the cheapest environment against the dearest, in the
    row's unit, e.g. "keras-jax runs cnn (fit), batch 128, for $0.41 per epoch against torch's
    $0.63 (1.53× the price, 95 % CI 1.41–1.66; …)"; the rows with the largest gap first. A gap
    is a finding only where the two cells' time ratio is beyond noise (its interval excludes
    1: two runs of one matrix once named opposite winners at 6.53× and 1.70×); its interval is
    the time ratio's, times the ratio of the GPUs the two cells hold."""
    rows: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for s in summaries:
        if not (s.get("answer_differs") or s.get("emulated") or s.get("column_group")):
            rows[(s["label"], s["batch_size"])].append(dict(s))
    said = []
    for (row, batch), cells in rows.items():
        unit = next((u for u in UNITS if sum(c.get(u[0]) is not None for c in cells) >= 2), None)
        if unit is None:
            continue
        key, text = unit
        priced = sorted((c for c in cells if c.get(key) is not None), key=lambda c: c[key])
        low, high = priced[0], priced[-1]
        gap = welch_ratio(high.get("repeat_medians_ms") or [],       # high's time ÷ low's
                          low.get("repeat_medians_ms") or []).scaled(gpus_held(high)
                                                                     / gpus_held(low))
        if high[key] <= low[key] or not gap.distinguishable or gap.ratio is None \
                or gap.ratio <= 1:
            continue
        said.append((high[key] / low[key], f"{low['environment']} runs {row}, batch {batch}, "
                     f"for {usd(low[key])} {text} against {high['environment']}'s "
                     f"{usd(high[key])} ({fmt(high[key] / low[key])}× the price, its time "
                     f"{fmt(gap.ratio)}× (95 % CI {fmt(gap.low)}–{fmt(gap.high)}) × the GPUs "
                     "each holds; list-price estimate)"))
    return [text for _, text in sorted(said, key=lambda x: -x[0])[:limit]]


def price_ratio(price_a: Mapping[str, Any] | None,
                price_b: Mapping[str, Any] | None) -> float | None:
    """B's per-GPU price ÷ A's; None unless both runs have one."""
    rate_a, rate_b = per_second(price_a), per_second(price_b)
    return rate_b / rate_a if rate_a and rate_b is not None else None


def versus(time_ratio: float | None, prices: float | None) -> str | None:
    """B against A in time and price: "1.8× faster at 2.1× the price: 14 % cheaper per item".
    time_ratio: B's time ÷ A's (below 1: B faster); prices: B's price ÷ A's."""
    if not time_ratio or not prices:
        return None
    per_item = time_ratio * prices
    speed = (f"{fmt(1 / time_ratio)}× faster" if time_ratio < 1
             else f"{fmt(time_ratio)}× slower" if time_ratio > 1 else "as fast")
    change = (f"{fmt((1 - per_item) * 100)} % cheaper" if per_item < 1
              else f"{fmt((per_item - 1) * 100)} % dearer" if per_item > 1 else "the same cost")
    return f"{speed} at {fmt(prices)}× the price: {change} per item"
