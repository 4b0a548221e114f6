"""What one environment's stack changes against another's, read from the records (each names the
distributions installed where it ran): what the report's environment effects and `compare`'s
stack table say a version change was, e.g. "numpy 2.4.6 → 1.26.4; + einops 0.8.1"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SHOWN = 6       # changes named before "and N more"


def installed(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """environment → the distributions its records name (an ok record's first; an environment
    whose records name none is absent)."""
    out: dict[str, dict[str, str]] = {}
    for record in sorted(records, key=lambda r: r.get("status") != "ok"):
        found = record.get("distributions")
        if isinstance(found, dict) and found and record.get("environment") not in out:
            out[str(record["environment"])] = {str(k): str(v) for k, v in found.items()}
    return out


def changes(base: Mapping[str, str], other: Mapping[str, str]) -> list[str]:
    """Every distribution that differs, by name: "name A → B", "+ name B" (only in `other`),
    "- name A" (only in `base`)."""
    out = [f"{n} {base[n]} → {other[n]}" for n in sorted(set(base) & set(other))
           if base[n] != other[n]]
    out += [f"+ {n} {other[n]}" for n in sorted(set(other) - set(base))]
    out += [f"- {n} {base[n]}" for n in sorted(set(base) - set(other))]
    return out


def text(found: list[str], limit: int = SHOWN) -> str:
    """The changes on one line, the first `limit` named."""
    if not found:
        return "the same distributions"
    more = f"; and {len(found) - limit} more" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more
