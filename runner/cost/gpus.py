"""NVML's GPU names as a price table's AcceleratorName: "NVIDIA A100-SXM4-40GB" is an "A100",
"NVIDIA A100-SXM4-80GB" an "A100-80GB", "NVIDIA H100 80GB HBM3" an "H100" (SkyPilot's names).
The first rule that matches wins; a GPU no rule knows has no accelerator name (doctor says so)."""

from __future__ import annotations

import re

from .prices import PriceRow

# (pattern on NVML's name, case-insensitive; the catalog's AcceleratorName), most specific first
RULES: tuple[tuple[str, str], ...] = (
    (r"\bA100\b.*\b80\s*GB\b", "A100-80GB"),
    (r"\bA100\b", "A100"),
    (r"\bH100\b.*\bNVL\b", "H100-NVL"),
    (r"\bH100\b", "H100"),
    (r"\bH200\b", "H200"),
    (r"\bGH200\b", "GH200"),
    (r"\bB200\b", "B200"),
    (r"\bL40S\b", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bA10G\b", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bV100\b", "V100"),
    (r"\bT4\b", "T4"),
)


def accelerator_of(nvml_name: str | None) -> str | None:
    """The price table's name for a GPU NVML names, or None."""
    if not nvml_name:
        return None
    for pattern, name in RULES:
        if re.search(pattern, nvml_name, re.IGNORECASE):
            return name
    return None


def matching_rows(rows: tuple[PriceRow, ...] | list[PriceRow], nvml_name: str | None,
                  count: int) -> list[PriceRow]:
    """The table's VMs with this GPU: those with `count` of them first, then the others, each
    group cheapest first."""
    accelerator = accelerator_of(nvml_name)
    if accelerator is None:
        return []
    found = [r for r in rows if r.accelerator.lower() == accelerator.lower()]
    return sorted(found, key=lambda r: (r.count != count, r.count, r.price))


def doctor_text(nvml_name: str | None, count: int, rows: tuple[PriceRow, ...],
                shown: int = 4) -> tuple[bool, str]:
    """(found, one line) for doctor: the price table's VMs with this machine's GPUs."""
    accelerator = accelerator_of(nvml_name)
    if accelerator is None:
        return False, (f"{nvml_name or 'no GPU'}: no accelerator name known for it (give "
                       "[cost] price_per_hour)")
    found = matching_rows(rows, nvml_name, count)
    if not found:
        return False, f"{nvml_name} → {accelerator}: no VM with it in the price table"
    listed = "; ".join(f"{r.provider} {r.instance} ({r.count}) {r.region} ${r.price:.2f}/h"
                       for r in found[:shown])
    more = f"; and {len(found) - shown} more" if len(found) > shown else ""
    return True, f"{nvml_name} → {accelerator}: {listed}{more}"
