"""What the host machine has: GPUs (through NVML) and the facts a report header needs."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import settings
from ..worker.metadata import base_metadata
from ..worker.monitor import Nvml


# The GPUs a run may use, by NVML index or UUID, comma-separated (default: all it sees). The first
# is also the GPU a container gets where no lane names one (a Ray node's cell Ray gave none).


@dataclass(frozen=True)
class Gpu:
    """One GPU of this host, as NVML numbers it (PCI bus order)."""

    index: int
    uuid: str | None = None
    name: str | None = None

    @property
    def device_id(self) -> str:
        """What CUDA_VISIBLE_DEVICES and a container's device request name it by: the UUID
        where known (CUDA's own order may differ from NVML's), else the index."""
        return self.uuid or str(self.index)


@functools.lru_cache(maxsize=1)
def gpu_facts() -> dict[str, Any]:
    """NVML facts of GPU 0 plus the count and `gpus` (index, uuid, name of each); empty when
    there is no GPU or no driver."""
    nvml = Nvml.open()
    if nvml is None:
        return {}
    facts = nvml.metadata()
    facts["gpus"] = _list_gpus(nvml.nv, facts.get("gpu_count") or 0)
    return facts


def _list_gpus(nv: Any, count: int) -> list[dict[str, Any]]:
    gpus = []
    for index in range(count):
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            uuid, name = nv.nvmlDeviceGetUUID(handle), nv.nvmlDeviceGetName(handle)
        except Exception:  # a device NVML cannot describe: known by its index only
            uuid = name = None
        gpus.append({"index": index,
                     "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                     "name": name.decode() if isinstance(name, bytes) else name})
    return gpus


def gpus() -> list[Gpu]:
    """Every GPU of this host (from gpu_facts, so tests fake one place)."""
    facts = gpu_facts()
    listed = facts.get("gpus")
    if listed is None:  # facts without the list: the count and GPU 0's name
        listed = [{"index": i, "name": facts.get("gpu_name")}
                  for i in range(facts.get("gpu_count") or 0)]
    return [Gpu(int(g["index"]), g.get("uuid"), g.get("name")) for g in listed]


def visible_gpus(gpus: list[Gpu], environ: Mapping[str, str] | None = None) -> list[Gpu]:
    """The host's GPUs this run may use: DL_BENCH_GPU's when set, else CUDA_VISIBLE_DEVICES's
    when set (NVML lists every GPU whatever that says), else all."""
    environ = os.environ if environ is None else environ
    wanted = settings.get(settings.GPU, environ)
    if wanted is None and "CUDA_VISIBLE_DEVICES" in environ:
        wanted = [w.strip() for w in environ["CUDA_VISIBLE_DEVICES"].split(",") if w.strip()]
    if wanted is None:
        return list(gpus)
    return [g for g in gpus if str(g.index) in wanted or (g.uuid and g.uuid in wanted)]


def default_gpu_id(environ: Mapping[str, str] | None = None) -> str:
    """The GPU a cell gets where no lane names one: DL_BENCH_GPU's first, else GPU 0."""
    wanted = settings.get(settings.GPU, environ) or ()
    return wanted[0] if wanted else "0"


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
