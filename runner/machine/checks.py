"""The machine's checks behind `python -m runner doctor` (runner/studies/doctor.py asks them):
GPUs, the driver against each CUDA lock's needs, the list prices of this machine's GPUs, the
Docker engine, the local builds' uv, free disk. Each is a Check with its fix on one line and
whether it blocks the run or only rules out another path. What needs an executor or the run's
setup (the NVIDIA toolkit probe, existing interpreters, the path a run would take) is asked in
studies/doctor.py: machine/ sits below executors/ and run/."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environments import Flavour

# CUDA 12.x wheels run on drivers >= 525.60.13 through CUDA minor-version compatibility; CUDA 13
# wheels (torch >= 2.11 on PyPI) need >= 580.
MIN_DRIVER = {12: (525, 60, 13), 13: (580, 0, 0)}
MIN_FREE_GB = 40.0          # the five GPU images (or CUDA venvs) take 5-10 GB each
TOOLKIT_DOCS = ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                "install-guide.html")
TOOLKIT_FIX = (f"install the NVIDIA Container Toolkit ({TOOLKIT_DOCS}), then run "
               "`sudo nvidia-ctk runtime configure --runtime=docker && "
               "sudo systemctl restart docker`")
# nvidia-cublas-cu12, jax-cuda12-plugin, ...: the CUDA major a lock's wheels were built for.
CUDA_WHEEL = re.compile(r"^(?:nvidia-[a-z0-9-]+-cu|jax-cuda)(\d+)", re.MULTILINE)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    blocking: bool = True        # False: it rules out another path, not this run


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.strip().split(".") if part.isdigit())


def cuda_majors(lock: Path) -> set[int]:
    """The CUDA major versions a lock's wheels were built for (empty for a CPU lock)."""
    try:
        return {int(major) for major in CUDA_WHEEL.findall(lock.read_text(encoding="utf-8"))}
    except OSError:
        return set()


def check_driver(version: str | None, needs: dict[str, set[int]] | None = None) -> Check:
    """The driver against what each CUDA lock in use needs ({lock label: CUDA majors})."""
    needs = needs if needs is not None else {"CUDA 12 wheels": {12}}
    if not version:
        return Check("driver", False, "no NVIDIA driver found",
                     "install the NVIDIA driver >= 525.60.13 (CUDA 12), e.g. `sudo apt install "
                     "nvidia-driver-550`")
    have = parse_version(version)
    too_old = {label: major for label, majors in needs.items() for major in majors
               if have < MIN_DRIVER.get(major, (0,))}
    if too_old:
        label, major = next(iter(too_old.items()))
        need = ".".join(map(str, MIN_DRIVER[major]))
        return Check("driver", False, f"driver {version} is older than {label} need (CUDA "
                     f"{major}: >= {need})", f"upgrade the NVIDIA driver to >= {need}")
    majors = sorted({m for ms in needs.values() for m in ms})
    shown = ", ".join(f"CUDA {m}" for m in majors) or "no CUDA lock in use"
    return Check("driver", True, f"driver {version}: {shown} ok")


def check_gpus(facts: dict[str, Any]) -> Check:
    count = facts.get("gpu_count") or 0
    if not count:
        return Check("GPUs", False, "no NVIDIA GPU seen through NVML: the CPU flavour runs "
                     "(smoke profile unless --profile full)",
                     "on a GPU machine, install the NVIDIA driver", blocking=False)
    return Check("GPUs", True, f"{count} × {facts.get('gpu_name', 'GPU')}")


def check_prices(facts: dict[str, Any]) -> Check:
    """The shipped price table's VMs with this machine's GPUs (what a [cost] table names)."""
    from ..cost import gpus, prices

    table = prices.read_table(prices.SHIPPED)
    found, detail = gpus.doctor_text(facts.get("gpu_name"), facts.get("gpu_count") or 1,
                                     table.rows)
    stale = prices.stale_note(table.retrieved_at)
    return Check("prices", found, detail + f" (list prices of {table.retrieved_at}"
                 + ("; old" if stale else "") + ")",
                 "name the VM in the matrix's [cost] (python -m runner prices show)",
                 blocking=False)


def check_disk(path: Path) -> Check:
    try:
        free_gb = shutil.disk_usage(path).free / 1e9
    except OSError as exc:
        return Check("disk", False, f"cannot read free space of {path}: {exc}",
                     "point Docker's data-root at a mounted disk")
    if free_gb < MIN_FREE_GB:
        return Check("disk", False, f"{free_gb:.0f} GB free under {path} (< {MIN_FREE_GB:.0f} GB "
                     "for the GPU stacks)", "free space (`docker system prune`, old environments "
                     "under ~/.cache/dl-bench-runner/envs) or use a larger disk", blocking=False)
    return Check("disk", True, f"{free_gb:.0f} GB free under {path}")


def toolkit_fix(error: str) -> str:
    if "could not select device driver" in error:
        return TOOLKIT_FIX
    if "nvidia-container-cli" in error or "driver" in error.lower():
        return "the toolkit cannot reach the driver: check `nvidia-smi` on the host, then " \
               "`sudo systemctl restart docker`"
    return "run `docker run --rm --gpus all IMAGE nvidia-smi` by hand and fix what it says"


def probe_image(client: Any) -> str | None:
    """A local image to run the toolkit probe in: one of ours, else any local image."""
    from ..environments.images import LABEL

    ours = client.images.list(filters={"label": f"{LABEL}.image"})
    candidates = ours or client.images.list()
    for image in candidates:
        if image.tags:
            return image.tags[0]
    return candidates[0].id if candidates else None


def check_engine(required: bool) -> tuple[Check, Any]:
    """(the check, a client or None). Not blocking unless the run must use Docker."""
    from ..environments.docker_engine import DockerUnavailable, EngineSettings, connect

    waits = EngineSettings.from_env().summary()
    try:
        client = connect(timeout=10)
        version = client.version()
    except DockerUnavailable as exc:
        fix = "install Docker (`sudo apt install docker.io`) and start it " \
              "(`sudo systemctl start docker`)"
        return Check("Docker engine", False, str(exc).split(";")[0], fix, blocking=required), None
    return Check("Docker engine", True, f"Docker {version.get('Version')} "
                 f"(API {version.get('ApiVersion')}); during a cell {waits}"), client


def check_cluster(executor: Any) -> Check:
    """The cluster the executor joined (choose_setup already failed when none answers)."""
    facts = executor.cluster()
    nodes = facts["nodes"]
    detail = (f"{executor.where}: Ray {facts['ray_version']}, {len(nodes)} node(s), "
              f"{facts['gpus']} GPUs, {facts['cpus']} CPUs")
    if not any(n["cpus"] for n in nodes):
        return Check("Ray cluster", False, detail + ": no node has a CPU to run cells on",
                     "start worker nodes (ray up with min_workers >= 1)")
    return Check("Ray cluster", True, detail)


def check_local_builds(folders: list[str], flavour: Flavour) -> Check:
    """The local executor builds venvs with each lock's Python: uv finds or fetches it."""
    from ..environments import folder_flavour, lock_path, lock_python
    from ..environments.venvs import find_uv

    wanted = sorted({lock_python(lock_path(f, folder_flavour(flavour, f))) for f in folders})
    if find_uv():
        return Check("local environments", True, f"uv builds them with Python "
                     f"{', '.join(wanted) or '-'} (the locks')")
    return Check("local environments", False, "uv is missing: only the runner's own Python "
                 "can build them", "pip install uv (a dependency of the runner: reinstall it)")
