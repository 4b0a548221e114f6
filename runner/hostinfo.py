"""What the host machine has: GPUs (through NVML) and the facts a report header needs."""

from __future__ import annotations

import functools
from typing import Any

from .worker.metadata import base_metadata
from .worker.monitor import Nvml


@functools.lru_cache(maxsize=1)
def gpu_facts() -> dict[str, Any]:
    """NVML facts of GPU 0 plus the count; empty when there is no GPU or no driver."""
    nvml = Nvml.open()
    return nvml.metadata() if nvml is not None else {}


def gpu_found() -> bool:
    return bool(gpu_facts().get("gpu_count"))


def host_summary() -> dict[str, Any]:
    meta = base_metadata()
    keys = ("host_name", "host_os", "cpu_model", "cpu_count", "mem_total_mb", "python_version")
    out = {k: meta.get(k) for k in keys}
    facts = gpu_facts()
    out.update(gpu_name=facts.get("gpu_name"), gpu_count=facts.get("gpu_count", 0),
               driver_version=facts.get("driver_version"))
    return out
