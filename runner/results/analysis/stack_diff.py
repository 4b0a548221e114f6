"""What one environment's stack changes against another's, read from the records (each names the
distributions installed where it ran): what the report's environment effects and `compare`'s
stack table say a version change was, e.g. "numpy 2.4.6 → 1.26.4; + einops 0.8.1"; and which
environments of a run are one framework at two stacks (stack_pairs)."""

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


# What an environment is apart from its stack: two that agree on these and differ only in their
# pins and packages (a derived stack, runner/environments/stacks.py) are one framework at two
# stacks, and the report gives them a stack effect of their own (effects.stack_tables).
SAME_PLACE = ("image", "python", "api", "backend", "env")


def stack_pairs(declared: Mapping[str, Mapping[str, Any]],
                environments: list[str]) -> list[tuple[str, str]]:
    """(first, second) in `environments`' order for every two environments whose declarations
    (the manifest's entries) share an image folder, API, backend and variables and differ only
    in their pins and packages."""
    def place(env: str) -> tuple[str, ...]:
        return tuple(repr(declared[env].get(k) or None) for k in SAME_PLACE)

    def stack(env: str) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(sorted(declared[env].get(k) or ())) for k in ("pins", "packages"))

    known = [e for e in environments if e in declared and declared[e].get("image")]
    return [(a, b) for i, a in enumerate(known) for b in known[i + 1:]
            if place(a) == place(b) and stack(a) != stack(b)]


def moved(declared: Mapping[str, Mapping[str, Any]], stacks: Mapping[str, Mapping[str, str]],
          base: str, other: str) -> str:
    """What `other`'s stack changes against `base`'s: the distributions its records name, else
    the pins and packages its declaration changes."""
    if base in stacks and other in stacks:
        return text(changes(stacks[base], stacks[other]))
    said = [f"{k} {', '.join(declared[e].get(k) or ['none'])}" for e in (base, other)
            for k in ("pins", "packages")]
    return f"{'; '.join(said[2:])} against {'; '.join(said[:2])}"
