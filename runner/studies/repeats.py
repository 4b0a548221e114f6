"""`doctor --measure --detect PCT`: how many repeats a side this machine needs for `compare` (and
the effects) to see a change of PCT with 80 % power, from the spread between processes its A/A
runs measured (each workload class's worst CV of repeat medians), by the ratio test's own power
(runner/results/analysis/power.py)."""

from __future__ import annotations

import math
from typing import Any

from ..results.analysis import power

DEFAULT_DETECT = 0.05


def advice(aa: dict[str, Any], change: float = DEFAULT_DETECT) -> list[dict[str, Any]]:
    """Per workload class of the A/A: its spread between processes (the worst run's CV of repeat
    medians, as a log spread), the repeats a side that detect `change` with 80 % power (None
    beyond power.MOST_REPEATS) and what 3 repeats would detect there."""
    out = []
    for name in aa.get("classes") or {}:
        spreads = [c["cv_repeats"] for c in aa.get("cells") or []
                   if c["workload"] == name and c.get("cv_repeats") is not None]
        if not spreads:
            continue
        spread = math.log1p(max(spreads))
        out.append({"workload": name, "spread": max(spreads), "change": change,
                    "repeats": power.repeats_for(spread, change),
                    "at_3": power.detectable_change(spread, 3, spread, 3)})
    return out


def lines(aa: dict[str, Any], change: float = DEFAULT_DETECT) -> list[str]:
    """advice() in words, one line per workload class."""
    out = []
    for entry in advice(aa, change):
        need = (f"{entry['repeats']} repeats a side" if entry["repeats"] is not None
                else f"more than {power.MOST_REPEATS} repeats a side")
        out.append(f"to detect a {change * 100:.3g} % change with 80 % power in "
                   f"{entry['workload']} (spread between processes {entry['spread'] * 100:.2f} "
                   f"%): {need} (3 a side detect {entry['at_3'] * 100:.3g} %)")
    return out
