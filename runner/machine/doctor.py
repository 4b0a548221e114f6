"""`python -m runner doctor [MATRIX]`: which path would a run of this matrix take here, and can
it? The executor and why, the flavour and why, per environment what it uses; then the checks
behind them: GPUs, the driver against each CUDA lock's needs, the Docker engine and NVIDIA
container toolkit, the locks' Python, existing interpreters, free disk. Every problem comes with
its fix on one line. Exit code 0 when the run can go ahead (problems that only rule out another
path, such as no Docker engine on a machine where the local path serves, are shown, not fatal);
1 when no path can run it.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from rich.console import Console

from ..environments import Flavour
from ..errors import EXIT_FAILED_CELLS, EXIT_OK, user_text
from ..paths import REPO_ROOT

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


def check_toolkit(client: Any) -> Check:
    """A tiny container with a GPU request: the toolkit mounts nvidia-smi into it."""
    import docker.errors

    from ..environments.images import LABEL
    from ..executors.containers import GPU_CAPABILITIES

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


def check_interpreters(pythons: list[str]) -> list[Check]:
    from ..environments import existing
    from ..executors.local import inherited_names, probe_environment

    checks = []
    for python in pythons:
        try:
            found = existing.probe(python, probe_environment(inherited_names()))
            checks.append(Check("interpreter", True, f"{python}: Python {found.version}"))
        except existing.InterpreterError as exc:
            checks.append(Check("interpreter", False, str(exc),
                                "point python = ... at a working interpreter (3.10 or newer)"))
    return checks


@dataclass
class Diagnosis:
    checks: list[Check]
    path: Callable[[Console], None] = lambda console: None   # prints the path a run would take


def diagnose(matrix_path: Path | None, executor: str | None,
             ray_address: str | None = None) -> Diagnosis:
    from . import hostinfo
    from ..schema import matrix as matrix_mod
    from ..run.console import show_setup
    from ..run.setup import choose_setup
    from ..environments import folder_flavour, lock_path
    from ..schema import is_image_reference

    facts = hostinfo.gpu_facts()
    checks = [check_gpus(facts)]
    if facts.get("gpu_count"):
        checks.append(check_prices(facts))
    matrix = matrix_mod.load(matrix_path, gpu_found=bool(facts.get("gpu_count"))) \
        if matrix_path else None
    setup = choose_setup(matrix, executor, ray_address=ray_address)
    envs = list(matrix.spec.environments.values()) if matrix else []
    folders = sorted({e.image for e in envs if e.image and not is_image_reference(e.image)})
    if facts.get("gpu_count"):
        needs = {}
        for folder in folders:
            lock = lock_path(folder, folder_flavour(setup.flavour, folder))
            needs[f"images/{folder}/{lock.name}"] = cuda_majors(lock)
        checks.append(check_driver(facts.get("driver_version"), needs if matrix else None))
    if setup.executor.cluster() is not None:
        checks.append(check_cluster(setup.executor))
    pinned = any(e.image and is_image_reference(e.image) for e in envs)   # run in Docker
    engine, client = check_engine(required=setup.executor.runs_images or pinned)
    checks.append(engine)
    if client is not None and facts.get("gpu_count"):
        toolkit = check_toolkit(client)
        toolkit.blocking = setup.executor.runs_images
        checks.append(toolkit)
    if setup.executor.builds_venvs and folders:
        checks.append(check_local_builds(folders, setup.flavour))
    checks += check_interpreters([e.python for e in envs if e.python])
    root = Path("/var/lib/docker")
    if client is not None:
        root = Path(client.info().get("DockerRootDir") or root)
        client.close()
    checks.append(check_disk(root if root.exists() else REPO_ROOT))

    def path(console: Console) -> None:
        if matrix is not None:
            console.print(f"[bold]path for {user_text(str(matrix.path))}:[/]")
            show_setup(matrix, setup, matrix.cells, console)
        setup.close()
    return Diagnosis(checks, path)


def show_settings(console: Console) -> None:
    """The runner's variables that are set here (runner/settings.py; docs/settings.md)."""
    from .. import settings

    here = settings.set_here()
    if not here:
        console.print("[bold]settings:[/] none of the runner's variables is set (defaults)",
                      soft_wrap=True)
    for setting, text in here:
        console.print(f"[bold]setting:[/] {setting.name}={user_text(text)} ({user_text(setting.meaning)})",
                      soft_wrap=True, highlight=False)


def main(console: Console, matrix_path: Path | None = None, executor: str | None = None,
         diagnosis: Callable[[], Diagnosis] | None = None, ray_address: str | None = None) -> int:
    found = diagnosis() if diagnosis else diagnose(matrix_path, executor, ray_address)
    for check in found.checks:
        mark = "[green]✓[/]" if check.ok else ("[red]✗[/]" if check.blocking else "[yellow]–[/]")
        # soft_wrap: each fix stays one line, whatever the terminal's width.
        console.print(f"{mark} {check.name}: {user_text(check.detail)}", highlight=False,
                      soft_wrap=True)
        if not check.ok and check.fix:
            console.print(f"    fix: {user_text(check.fix)}", highlight=False, soft_wrap=True)
    found.path(console)
    show_settings(console)
    blocking = [c for c in found.checks if not c.ok and c.blocking]
    if blocking:
        console.print(f"[red]no path can run this here[/]: {user_text(blocking[0].name)}",
                      highlight=False)
        return EXIT_FAILED_CELLS
    return EXIT_OK
