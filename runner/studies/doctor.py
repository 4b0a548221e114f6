"""`python -m runner doctor [MATRIX]`: which path would a run of this matrix take here, and can
it? The executor and why, the flavour and why, per environment what it uses (the run's own
setup, runner/run/setup.py); then the checks behind them: GPUs, the driver against each CUDA
lock's needs, the Docker engine and NVIDIA container toolkit, the locks' Python, existing
interpreters, free disk (runner/machine/checks.py, and here those that ask an executor). Every
problem comes with its fix on one line. Exit code 0 when the run can go ahead (problems that
only rule out another path, such as no Docker engine on a machine where the local path serves,
are shown, not fatal); 1 when no path can run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from rich.console import Console

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, user_text
from ..machine.checks import (Check, check_cluster, check_disk, check_driver, check_engine,
                              check_gpus, check_local_builds, check_prices, cuda_majors,
                              probe_image, toolkit_fix)
from ..paths import REPO_ROOT


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
    from ..machine import hostinfo
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
        console.print(f"[bold]setting:[/] {setting.name}={user_text(setting.shown(text))} ({user_text(setting.meaning)})",
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
