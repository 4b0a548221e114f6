"""Whether two sides' numbers may be compared, and what differs when they may not (`compare`'s
model, apart from its verdict and its renderings).

A cell's figures depend on more than its coordinates: the stack it ran on (the comparability
metadata: runner.worker.metadata.KEYS entries flagged True, such as the GPU, driver, framework
version, lock hash, image digest, the cell's method version (the worker code it runs), the
variables the matrix set for the worker, and the host variables DL_BENCH_INHERIT_ENV passed to
it), and the settings of its timed window (SETTING_KEYS: how many steps were timed or for how
long, and how many warm-up steps came before). Two cells that differ in any of these are not compared; the keys are named.

The block size (calls_per_sample) is not among them: it is calibrated in every run (the smallest
power of two of calls lasting 10 ms), so a cell that got 2× slower gets half the block, and
refusing to compare across block sizes hid exactly the largest regressions. Per-step times
compare across block sizes (block_regimes says so in a note); only a timing regime that truly
differs is refused: calls synchronised one by one against blocks on a GPU (the per-call
synchronisation's latency is in one side's steps only), or a block too short for its target on
either side (its synchronisation is not spread over the block).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...worker.metadata import KEYS
from ..data.types import Record
from . import stack_diff
from .peaks import ran_on_gpu

# Metadata that decides whether two measurements may be pooled or compared (GPU, driver, CUDA,
# framework version, lock hash, image digest, CPU model, ...): flagged in the metadata registry.
COMPARABILITY_KEYS = tuple(key for key, (_, decides) in KEYS.items() if decides)


def metadata_values(records: Sequence[Mapping[str, Any]],
                    keys: tuple[str, ...] = COMPARABILITY_KEYS) -> dict[str, set[str]]:
    """Every value each key (the comparability keys by default) took in these records (absent
    counts as None)."""
    values: dict[str, set[str]] = {key: set() for key in keys}
    for record in records:
        meta = record.get("metadata") or {}
        for key in keys:
            values[key].add(json.dumps(metadata_value(meta, key), sort_keys=True))
    return values


def metadata_value(meta: Mapping[str, Any], key: str) -> Any:
    """A record's value of a key. A record made before method versions has none: its method was
    the whole runner's (runner_version, then the comparability key), so two such records of one
    runner stay comparable and neither is comparable with a newer one."""
    if key == "method_version" and key not in meta:
        return meta.get("runner_version")
    return meta.get(key)


# Record fields (the run's settings, copied from the cell spec) that change what the timed window
# holds: a cell timed over 10 steps after 2 warm-up steps is not the one timed for 60 s, nor a
# tuned cell the one with other knobs. The block size is judged apart (block_regimes).
SETTING_KEYS = ("steps", "warmup_steps", "min_time_s", "max_time_s", "tuning")
# What an environment's stack is: where it came from (lock, image), what it holds, what it ran on,
# which runner measured it (runner_version: for information; each cell's method version decides).
STACK_KEYS = ("lock_sha256", "image_digest", "image_id", "distributions_sha256",
              "driver_version", "gpu_name", "gpu_power_limit_w", "runner_version", "worker_env",
              "inherited_env")
# The comparability keys that make up the software stack itself: with --environments the two
# stacks are what is compared, so these differ on purpose (shown in the stack table; every other
# key — the machine, the GPU, the cell's method version, the worker's variables — must agree).
SOFTWARE_KEYS = ("python_version", "python_implementation", "framework_version", "keras_version",
                 "backend_version", "jaxlib_version", "tensorflow_version", "cuda_version",
                 "cudnn_version", "image_id", "image_digest", "lock_sha256",
                 "distributions_sha256")


def setting_values(records: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Every value each setting key took in these records (absent counts as None, and so do
    no knobs: a record made before the tuned tier ran its defaults)."""
    return {key: {json.dumps(r.get(key) or (None if key == "tuning" else r.get(key)),
                             sort_keys=True) for r in records}
            for key in SETTING_KEYS}


def differences(records_a: Sequence[Mapping[str, Any]],
                records_b: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """key → 'A's value → B's value' for every comparability key or setting that differs."""
    sides = [{**metadata_values(records), **setting_values(records)}
             for records in (records_a, records_b)]
    return {key: f"{shown(sides[0][key])} → {shown(sides[1][key])}"
            for key in (*COMPARABILITY_KEYS, *SETTING_KEYS) if sides[0][key] != sides[1][key]}


def block_regimes(records_a: Sequence[Mapping[str, Any]],
                  records_b: Sequence[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """(why the two sides' timing regimes cannot be compared, a note on their block sizes): the
    first is None unless one side synchronised every call where the other timed blocks, on a
    GPU, or the block sizes differ and a side's block was too short for its target (the
    record's extra.block_short); the note says "blocks of 16 → 8 calls" where sizes differ."""
    sides = [_blocks(records) for records in (records_a, records_b)]
    (regime_a, sizes_a), (regime_b, sizes_b) = sides
    if sizes_a == sizes_b:
        return None, None
    text = f"blocks of {_sizes(sizes_a)} → {_sizes(sizes_b)} calls"
    on_gpu = any(ran_on_gpu(r) for r in (*records_a, *records_b))
    if regime_a != regime_b and on_gpu:
        return (f"timing regime differs: {text} ({regime_a} → {regime_b} on a GPU: the "
                "synchronisation after every call is in one side's steps only)"), None
    short = [side for side, records in (("A", records_a), ("B", records_b))
             if any(isinstance((r.get("extra") or {}).get("block_short"), Mapping)
                    for r in records)]
    if short:
        return (f"timing regime differs: {text}, and {' and '.join(short)}'s block was too "
                "short for its target (its synchronisation is not spread over the block)"), None
    return None, (f"{text} (per-step times compare across block sizes; `--blocks-from RUN_A` "
                  "on B's run times A's blocks)")


def _blocks(records: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[int, ...]]:
    """A side's regime ("per-call" or "blocked") and its block sizes."""
    per_call = all(r.get("block_source") == "per_call" or (r.get("block_source") is None
                   and (r.get("calls_per_sample") or 1) == 1) for r in records)
    sizes = sorted({int(r.get("calls_per_sample") or 1) for r in records})
    return ("per-call" if per_call else "blocked"), tuple(sizes)


def _sizes(sizes: tuple[int, ...]) -> str:
    return "/".join(str(size) for size in sizes)


@dataclass
class StackComparison:
    """One environment's stack in A against B."""

    environment: str
    differs: list[str] = field(default_factory=list)   # "lock_sha256 1a2b… → 3c4d…"
    only_in: str | None = None                         # "A" or "B": measured on one side only

    @property
    def same(self) -> bool:
        return not self.differs and self.only_in is None

    def describe(self) -> str:
        if self.only_in:
            return f"only in run {self.only_in}"
        return "same stack" if self.same else "differs: " + ", ".join(self.differs)


def compare_stacks(records_a: list[Record],
                   records_b: list[Record]) -> list[StackComparison]:
    """Per environment measured in either run: the same stack, or what differs. A side's stack
    is read from its ok records (from every measured record when none is ok)."""
    def by_environment(records: list[Record]) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = {}
        for record in records:
            if record.get("status") != "not_applicable":
                out.setdefault(record["environment"], []).append(record)
        return {env: [r for r in rs if r["status"] == "ok"] or rs for env, rs in out.items()}

    sides = by_environment(records_a), by_environment(records_b)
    stacks = []
    for env in dict.fromkeys([*sides[0], *sides[1]]):
        if env not in sides[0] or env not in sides[1]:
            stacks.append(StackComparison(env, only_in="A" if env in sides[0] else "B"))
            continue
        a, b = (metadata_values(side[env], STACK_KEYS) for side in sides)
        differs = [f"{key} {shown(a[key])} → {shown(b[key])}" for key in STACK_KEYS
                   if a[key] != b[key]]
        moved = stack_diff.changes(*(stack_diff.installed(side[env]).get(env, {})
                                     for side in sides))
        stacks.append(StackComparison(env, differs + ([f"distributions {stack_diff.text(moved)}"]
                                                      if moved else [])))
    return stacks


def shown(values: set[str]) -> str:
    """The values one side had, readable: 550.54.15, or absent, or 12.4/12.6 for a mixed side."""
    decoded = [json.loads(v) for v in values]
    texts = ["absent" if v is None else _variables(v) if isinstance(v, dict)
             else str(v) if len(str(v)) <= 24 else str(v)[:12] + "…" for v in decoded]  # hashes
    return "/".join(sorted(texts))


def _variables(env: Mapping[str, Any]) -> str:
    """Environment variables, readable: {XLA_FLAGS=--xla_gpu_autotune_level=0} or {}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(env.items())) + "}"
