"""Defaults and tuned (docs/tuned.md): each environment's cell at tier = "defaults" beside its
cell at tier = "tuned" of the same row — both re-measured in fresh repeats like every cell, never
a probe's time — the gain (defaults ÷ tuned) with its interval, the knobs the tuning chose and
what it took (the manifest's `tuning`, runner/run/tiers.py), and the findings where tuning
changes which environment is fastest. A gain whose interval covers 1 is "no gain": the tuning
found nothing the repeats can tell from the defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data.types import CellSummary, Manifest
from ..formatting import fmt
from .ratios import Ratio
from .speedups import fastest, speedup
from .summaries import row_label

DEFAULTS, TUNED = "defaults", "tuned"
BATCH_KNOB = "batch_size"        # the batch search's knob (runner/worker/catalog/knobs.py)
# A pair's verdict (the knobs' status comes from tuned.toml, runner/results/data/tuning.py).
GAIN, NO_GAIN, SLOWER, UNMEASURED = "gain", "no gain", "slower", "not measured"


@dataclass(frozen=True)
class TierPair:
    """One environment's two cells of a row, and what tuning gave."""

    row: tuple[str, int]                  # (row label without the tier, batch size)
    environment: str
    defaults: CellSummary | None
    tuned: CellSummary | None
    gain: Ratio                           # defaults ÷ tuned: above 1, the tuned cell is faster
    verdict: str                          # GAIN, NO_GAIN, SLOWER or UNMEASURED
    knobs: dict[str, Any] = field(default_factory=dict)
    tuning: dict[str, Any] = field(default_factory=dict)    # the manifest's entry (minutes, …)
    # The tuning searched the batch ([tuning] batch = "max"): the two cells' steps hold other
    # batches, so they compare in items/s (the gain: tuned ÷ defaults items/s), never ms/step.
    per_item: bool = False


def _verdict(gain: Ratio) -> str:
    if gain.ratio is None:
        return UNMEASURED
    if not gain.distinguishable:
        return NO_GAIN
    return GAIN if gain.ratio > 1 else SLOWER


def tier_pairs(summaries: list[CellSummary], manifest: Manifest | None) -> list[TierPair]:
    """Every environment × row that has a tuned cell, in the run's order."""
    entries = (manifest or {}).get("tuning") or {}
    by_key: dict[tuple[str, int, str], dict[str, CellSummary]] = {}
    for s in summaries:
        tier = str(s.get("tier") or DEFAULTS)
        key = (row_label(s, without="tier"), int(s["batch_size"]), s["environment"])
        by_key.setdefault(key, {})[tier] = s
    out = []
    for (label, batch, env), tiers in by_key.items():
        tuned = tiers.get(TUNED)
        if tuned is None:
            continue
        base = tiers.get(DEFAULTS)
        gain = speedup(base, tuned) if base is not None else Ratio(None, why="no defaults cell")
        entry = entries.get(tuned["cell_id"]) or {}
        knobs = dict(entry.get("knobs") or {})
        per_item = BATCH_KNOB in knobs
        if per_item:
            gain = _per_item(gain, base, tuned)
        out.append(TierPair((label, batch), env, base, tuned, gain, _verdict(gain), knobs,
                            dict(entry), per_item))
    return out


def _per_item(gain: Ratio, base: CellSummary | None, tuned: CellSummary) -> Ratio:
    """A per-step gain as a per-item one: times the tuned step's items over the defaults'."""
    items = [cell.get("items_per_step") if cell else None for cell in (base, tuned)]
    if gain.ratio is None or not items[0] or not items[1]:
        return Ratio(None, why="no items per step to compare the batches by")
    return gain.scaled(float(items[1]) / float(items[0]))


def batch_searched_ids(manifest: Manifest | None) -> set[str]:
    """The tuned cells whose tuning changed their batch (the manifest's `tuning`): their
    ms/step belongs in no table beside cells at the row's batch."""
    entries = (manifest or {}).get("tuning") or {}
    return {cell_id for cell_id, entry in entries.items()
            if BATCH_KNOB in (entry.get("knobs") or {})}


def ranking_changes(pairs: list[TierPair]) -> list[str]:
    """A finding per row where tuning changes which environment is fastest beyond noise: the
    tuned winner's lead over the defaults' winner at tuned, and where that one stood at the
    defaults. A change whose two leads are both within noise is no finding (two runs of one
    matrix could name either winner): such rows are counted in one closing sentence."""
    rows: dict[tuple[str, int], list[TierPair]] = {}
    for pair in pairs:
        if not pair.per_item:       # a searched batch: its ms/step ranks nothing per step
            rows.setdefault(pair.row, []).append(pair)
    said, within_noise = [], 0
    for (label, batch), row in rows.items():
        complete = [p for p in row if p.defaults is not None and p.tuned is not None]
        at_defaults = fastest([p.defaults for p in complete if p.defaults is not None])
        at_tuned = fastest([p.tuned for p in complete if p.tuned is not None])
        if at_defaults is None or at_tuned is None:
            continue
        before, after = at_defaults[0]["environment"], at_tuned[0]["environment"]
        if before == after:
            continue
        tuned_of = {p.environment: p.tuned for p in complete}
        defaults_of = {p.environment: p.defaults for p in complete}
        now = speedup(tuned_of[before] or {}, tuned_of[after] or {})
        then = speedup(defaults_of[after] or {}, defaults_of[before] or {})
        if now.ratio is None or then.ratio is None:
            continue
        if not (now.distinguishable or then.distinguishable):
            within_noise += 1
            continue
        said.append(f"tuned, {after} is {_times(now)} than {before} for {label}, batch {batch}; "
                    f"at defaults it was {_times(then, slower=True)}.")
    if within_noise:
        said.append(f"In {within_noise}{' more' if said else ''} "
                    f"row{'s' if within_noise > 1 else ''} the fastest "
                    "environment changes with tuning, within noise at both tiers (not a finding).")
    return said


def _times(ratio: Ratio, slower: bool = False) -> str:
    """"1.4× faster (95 % CI 1.2–1.6)": a ratio above 1 as faster; `slower` reads a ratio of
    the other's time over this one's as how much slower this one was."""
    value = ratio.ratio or 1.0
    word = "slower" if slower else "faster"
    noise = "" if ratio.distinguishable else ", within noise"
    interval = f" (95 % CI {fmt(ratio.low)}–{fmt(ratio.high)}{noise})" if ratio.has_interval \
        else ""
    return f"{fmt(value)}× {word}{interval}"


def knobs_text(knobs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items()) or "defaults"
