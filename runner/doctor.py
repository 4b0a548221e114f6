"""`python -m runner doctor`: can this machine run the GPU path? Docker engine, NVIDIA container
toolkit, driver against the CUDA 12 wheels' needs, GPUs, free disk. Every failure comes with its
fix on one line. Exit code 0 when all is good, 1 otherwise.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.markup import escape

from .errors import EXIT_FAILED_CELLS, EXIT_OK
from .matrix import REPO_ROOT

# CUDA 12.x wheels (every GPU lock here) run on drivers >= 525.60.13 through CUDA minor-version
# compatibility; CUDA 13 wheels (torch >= 2.11 on PyPI) need >= 580.
CUDA12_MIN_DRIVER = (525, 60, 13)
CUDA13_MIN_DRIVER = (580, 0, 0)
MIN_FREE_GB = 40.0          # the five GPU images take 5-10 GB each
TOOLKIT_DOCS = ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                "install-guide.html")
TOOLKIT_FIX = (f"install the NVIDIA Container Toolkit ({TOOLKIT_DOCS}), then run "
               "`sudo nvidia-ctk runtime configure --runtime=docker && "
               "sudo systemctl restart docker`")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.strip().split(".") if part.isdigit())


def check_driver(version: str | None) -> Check:
    if not version:
        return Check("driver", False, "no NVIDIA driver found",
                     "install the NVIDIA driver >= 525.60.13 (CUDA 12), e.g. `sudo apt install "
                     "nvidia-driver-550`")
    have = parse_version(version)
    if have < CUDA12_MIN_DRIVER:
        return Check("driver", False, f"driver {version} is older than the CUDA 12 wheels need "
                     "(>= 525.60.13)", "upgrade the NVIDIA driver to >= 525.60.13 (550+ advised)")
    note = "CUDA 12 wheels ok" + ("; CUDA 13 wheels ok too" if have >= CUDA13_MIN_DRIVER
                                  else "; CUDA 13 wheels (torch >= 2.11) would need >= 580")
    return Check("driver", True, f"driver {version}: {note}")


def check_gpus(facts: dict[str, Any]) -> Check:
    count = facts.get("gpu_count") or 0
    if not count:
        return Check("GPUs", False, "no NVIDIA GPU seen through NVML",
                     "run on a GPU machine with the NVIDIA driver, or use `--executor local` "
                     "(CPU) instead of Docker")
    return Check("GPUs", True, f"{count} × {facts.get('gpu_name', 'GPU')}")


def check_disk(path: Path) -> Check:
    try:
        free_gb = shutil.disk_usage(path).free / 1e9
    except OSError as exc:
        return Check("disk", False, f"cannot read free space of {path}: {exc}",
                     "point Docker's data-root at a mounted disk")
    if free_gb < MIN_FREE_GB:
        return Check("disk", False, f"{free_gb:.0f} GB free under {path} (< {MIN_FREE_GB:.0f} GB "
                     "for the GPU images)", "free space (`docker system prune`) or move Docker's "
                     "data-root to a larger disk")
    return Check("disk", True, f"{free_gb:.0f} GB free under {path}")


def toolkit_fix(error: str) -> str:
    if "could not select device driver" in error:
        return TOOLKIT_FIX
    if "nvidia-container-cli" in error or "driver" in error.lower():
        return "the toolkit cannot reach the driver: check `nvidia-smi` on the host, then " \
               "`sudo systemctl restart docker`"
    return "run `docker run --rm --gpus all IMAGE nvidia-smi` by hand and fix what it says"


def check_toolkit(client: Any) -> Check:
    """A tiny container with a GPU request: the toolkit mounts nvidia-smi into it."""
    import docker.errors

    from .executors.docker import GPU_CAPABILITIES
    from .images import LABEL

    image = probe_image(client)
    if image is None:
        return Check("NVIDIA toolkit", False, "no local image to probe with",
                     "build one first: `python -m runner build matrix.toml --executor docker`")
    container = None
    try:
        # create + start rather than run(remove=True): a refused start would leave it behind.
        container = client.containers.create(
            image, ["nvidia-smi", "-L"], network_mode="none", labels={f"{LABEL}.doctor": "1"},
            device_requests=[docker.types.DeviceRequest(driver="nvidia", count=-1,
                                                        capabilities=GPU_CAPABILITIES)])
        container.start()
        code = container.wait(timeout=120).get("StatusCode")
        output = container.logs().decode(errors="replace")
    except docker.errors.DockerException as exc:
        text = str(exc)
        return Check("NVIDIA toolkit", False, text.strip().splitlines()[-1][:300],
                     toolkit_fix(text))
    finally:
        if container is not None:
            container.remove(force=True)
    if code != 0:
        return Check("NVIDIA toolkit", False, f"nvidia-smi in a container exited {code}: "
                     f"{output.strip()[-200:]}", toolkit_fix(output))
    return Check("NVIDIA toolkit", True,
                 f"a container sees {len(output.strip().splitlines())} GPU(s)")


def probe_image(client: Any) -> str | None:
    """A local image to run the toolkit probe in: one of ours, else any local image."""
    from .images import LABEL

    ours = client.images.list(filters={"label": f"{LABEL}.image"})
    candidates = ours or client.images.list()
    for image in candidates:
        if image.tags:
            return image.tags[0]
    return candidates[0].id if candidates else None


def run_checks() -> list[Check]:
    from . import hostinfo
    from .executors.docker import DockerUnavailable, connect

    checks: list[Check] = []
    client = None
    try:
        client = connect(timeout=10)
        version = client.version()
        checks.append(Check("Docker engine", True, f"Docker {version.get('Version')} "
                            f"(API {version.get('ApiVersion')})"))
    except DockerUnavailable as exc:
        fix = "pip install 'docker>=7'" if "SDK" in str(exc) else \
            "install Docker (`sudo apt install docker.io`) and start it " \
            "(`sudo systemctl start docker`)"
        checks.append(Check("Docker engine", False, str(exc).split(";")[0], fix))

    facts = hostinfo.gpu_facts()
    gpus = check_gpus(facts)
    checks.append(gpus)
    if gpus.ok:
        checks.append(check_driver(facts.get("driver_version")))
        if client is not None:
            checks.append(check_toolkit(client))
    root = Path("/var/lib/docker")
    if client is not None:
        root = Path(client.info().get("DockerRootDir") or root)
    checks.append(check_disk(root if root.exists() else REPO_ROOT))
    if client is not None:
        client.close()
    return checks


def main(console: Console, checks: Callable[[], list[Check]] = run_checks) -> int:
    results = checks()
    for check in results:
        mark = "[green]✓[/]" if check.ok else "[red]✗[/]"
        # soft_wrap: each fix stays one line, whatever the terminal's width.
        console.print(f"{mark} {check.name}: {escape(check.detail)}", highlight=False,
                      soft_wrap=True)
        if not check.ok and check.fix:
            console.print(f"    fix: {escape(check.fix)}", highlight=False, soft_wrap=True)
    return EXIT_OK if all(c.ok for c in results) else EXIT_FAILED_CELLS
