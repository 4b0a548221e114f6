"""What a cell's container is made of, and how the runner's containers are cleaned up.

Each container gets the repository's `runner` package read-only, the cell's work folder (spec.json
in, result.json out) as its only writable mount, a read-only root filesystem with a tmpfs /tmp, no
network, no capabilities, no new privileges, a non-root user, a cap on its processes, NVIDIA's
recommended shm size and ulimits, and its GPU (a data-parallel cell: its GPUs) through a device
request when the cell runs on the GPU (`run_options`, a pure function: the unit tests check
exactly what the engine is asked for).
Containers carry the runner's labels and are removed afterwards; leftovers of a killed run are
removed when the next executor connects. Its output goes to the cell's log, capped as a local
worker's is; its GPU is sampled from the host over its life.

The docker SDK is imported lazily: planning and `--dry-run` never need it.
"""

from __future__ import annotations

import functools
import os
import resource
import socket
from pathlib import Path
from typing import Any

from ..environments import images
from ..environments.docker_engine import EngineProblem, EngineSettings, call
from ..paths import REPO_ROOT
from ..worker.user_code import STAGED_ENV
from ..worker.protocol import COMPILE_CACHE_ENV
from .base import gpu_hand_off
from .local import RUNNER_OWNED_ENV, log_caps
from .supervisor import CappedLog

CODE_ROOT = "/opt/dl-bench"                 # PYTHONPATH inside; the package is CODE_ROOT/runner
CELL_DIR = "/cell"                          # the cell's work folder inside
STAGED_ROOT = f"{CODE_ROOT}/workloads"      # a user workload's staged code inside (read-only)
CONTAINER_USER = "1000:1000"                # the images' `bench` user
SHM_SIZE = "8g"                             # NVIDIA's containers suggest a large /dev/shm
STACK_BYTES = 67108864                      # NVIDIA: --ulimit memlock=-1 --ulimit stack=67108864
GPU_CAPABILITIES = [["gpu", "compute", "utility"]]
LABEL_RUNNER = f"{images.LABEL}.runner"    # every container of the runner
LABEL_OWNER = f"{images.LABEL}.owner"      # host:pid of the runner process that started it
LABEL_RUN = f"{images.LABEL}.run-id"
LABEL_CELL = f"{images.LABEL}.cell"
# Processes and threads a container may hold: far above what a framework starts (TensorFlow
# and XLA thread pools, torch.compile's workers: hundreds on a large VM), far below a fork bomb.
PIDS_LIMIT = 8192
# The root filesystem is read-only; frameworks write only under /tmp (HOME=/tmp: Keras's
# config, compile caches, torch.compile's kernels, which are loaded from there, hence exec).
TMPFS = {"/tmp": "rw,exec,nosuid,nodev,mode=1777"}


def container_user() -> str:
    """The host user when it is not root (its files stay its own), else the images' `bench`."""
    uid = os.getuid()
    return CONTAINER_USER if uid == 0 else f"{uid}:{os.getgid()}"


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# NVIDIA's recommendation: name -> (soft, hard); -1 is unlimited.
ULIMITS = {"memlock": (-1, -1), "stack": (STACK_BYTES, STACK_BYTES)}


def host_capped_ulimits() -> dict[str, tuple[int, int]]:
    """ULIMITS lowered to this host's hard limits, for engines that may not raise them (a dockerd
    without CAP_SYS_RESOURCE: "error setting rlimit ... operation not permitted")."""
    capped = {}
    for name, (soft, hard) in ULIMITS.items():
        limit = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))[1]
        if limit == resource.RLIM_INFINITY:
            capped[name] = (soft, hard)
        else:
            hard = limit if hard == -1 else min(hard, limit)
            capped[name] = (hard if soft == -1 else min(soft, hard), hard)
    return capped


def run_options(image: str, work_dir: Path, env: dict[str, str], *, labels: dict[str, str],
                gpu_id: str | None, user: str = CONTAINER_USER, code_dir: Path | None = None,
                shm_size: str = SHM_SIZE, mem_limit: str | None = None,
                ulimits: dict[str, tuple[int, int]] | None = None,
                staged_code: Path | None = None) -> dict[str, Any]:
    """Keyword arguments of `client.containers.create` for one cell × repeat (a pure function:
    the unit tests check exactly what the engine is asked for)."""
    from docker.types import DeviceRequest, Mount, Ulimit

    code_dir = code_dir or REPO_ROOT / "runner"
    # The cell's variables, minus those the runner owns (PATH stays the image's). A new container
    # starts with empty compilation caches under its own HOME, whatever [run]
    # keep_compile_caches says (nothing of the host's is mounted).
    environment = {**{k: v for k, v in env.items() if k not in RUNNER_OWNED_ENV},
                   "PYTHONPATH": CODE_ROOT, "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1", "HOME": "/tmp",
                   COMPILE_CACHE_ENV: "fresh"}
    devices = []
    if gpu_id is not None:
        devices.append(DeviceRequest(driver="nvidia", device_ids=str(gpu_id).split(","),
                                     capabilities=GPU_CAPABILITIES))
        # A framework that does not see the GPU it was given fails the cell instead of running on
        # the CPU (JAX, for one, falls back silently; JAX_PLATFORMS=cuda makes it fail loudly).
        environment.update(gpu_hand_off())
        environment.setdefault("JAX_PLATFORMS", "cuda")
    options: dict[str, Any] = dict(
        image=image,
        command=["python", "-P", "-m", "runner.worker", f"{CELL_DIR}/spec.json",
                 f"{CELL_DIR}/result.json"],
        working_dir=CELL_DIR,
        user=user,
        environment=environment,
        mounts=[Mount(f"{CODE_ROOT}/runner", str(code_dir), type="bind", read_only=True),
                Mount(CELL_DIR, str(work_dir), type="bind", read_only=False)],
        network_mode="none",
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        read_only=True,
        tmpfs=dict(TMPFS),
        pids_limit=PIDS_LIMIT,
        init=True,
        shm_size=shm_size,
        ulimits=[Ulimit(name=name, soft=soft, hard=hard)
                 for name, (soft, hard) in (ulimits or ULIMITS).items()],
        device_requests=devices,
        labels={LABEL_RUNNER: "1", **labels},
        detach=True,
        stdin_open=False,
        tty=False,
    )
    if staged_code is not None:       # a user workload: its code mounted read-only
        options["mounts"].append(Mount(STAGED_ROOT, str(staged_code.resolve()), type="bind",
                                       read_only=True))
        environment[STAGED_ENV] = STAGED_ROOT
    if mem_limit:
        options.update(mem_limit=mem_limit, memswap_limit=mem_limit)
    return options


def remove_leftovers(client: Any) -> list[str]:
    """Remove the runner's containers that no live runner owns: on this host, those whose owning
    process is gone (a killed run); from other hosts sharing the engine, those that stopped.
    Another live run's containers stay, whatever their state."""
    removed = []
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL_RUNNER}):
        owner = (container.labels or {}).get(LABEL_OWNER, "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host == host:
            orphan = not (pid.isdigit() and _pid_alive(int(pid)))
        else:
            orphan = container.status in ("exited", "dead")
        if orphan:
            try:
                container.remove(force=True)
                removed.append(container.short_id)
            except Exception:  # removed meanwhile by someone else: fine
                pass
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def container_name(cell: str) -> str:
    """dl-bench-<cell id>-r<k>-<random>: unique, so that a create tried twice cannot make two."""
    import secrets

    return f"dl-bench-{cell}-{secrets.token_hex(4)}"


def kill_quietly(container: Any) -> None:
    import docker.errors

    try:
        container.kill()
    except docker.errors.APIError:  # it exited between the timeout and the kill
        pass


def remove_quietly(container: Any, client: Any = None) -> None:
    """Remove a container (an object, or a name with its client); one already gone is fine."""
    import docker.errors

    try:
        if client is not None:
            client.api.remove_container(container, force=True)
        else:
            container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:      # 409: its removal is already in progress
            raise


def remove_own(client: Any, settings: EngineSettings) -> None:
    """At the end of a run: remove every container this runner process made that is still
    there (one an engine too slow to answer made after the runner gave up on it)."""
    try:
        mine = call("list the runner's containers", lambda: client.containers.list(
            all=True, filters={"label": f"{LABEL_OWNER}={owner_label()}"}), settings)
        for container in mine:
            call("remove the container", functools.partial(remove_quietly, container), settings)
    except EngineProblem:
        pass


def options_gpu(attrs: dict[str, Any]) -> str | None:
    """The GPU id a container was given (from its device request), or None."""
    for request in (attrs.get("HostConfig") or {}).get("DeviceRequests") or []:
        ids = request.get("DeviceIDs") or []
        if ids:
            return str(ids[0])
    return None


def host_gpu_monitor(gpu_id: str) -> Any:
    """Sample the cell's GPU from the host over the container's lifetime (nvidia-ml-py on the
    host: device counters need no PID, and PIDs inside a container are not the host's). The
    worker samples its timed window from inside as well; this is the cross-check. None without
    NVML."""
    from ..worker.monitor import Monitor, Nvml

    try:
        import pynvml

        pynvml.nvmlInit()
        if gpu_id.startswith(("GPU-", "MIG-")):
            handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_id)
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(gpu_id))
    except Exception:  # no library, no driver, no such device: no host figures
        return None
    return Monitor(gpu=Nvml(pynvml, handle)).__enter__()


def save_host_gpu(monitor: Any, path: Path) -> dict[str, Any]:
    """host_gpu.json beside the cell's result (kept with the cell's work files), and the record's
    host_gpu field: GPU figures over the container's whole life."""
    from ..worker.protocol import write_json_atomic

    monitor.__exit__(None, None, None)
    # The host's CPU figures would count the container's worker as another process.
    summary = {k: v for k, v in monitor.summary().items()
               if k not in ("cpu_util_mean", "host_other_cpu")}
    summary.update(window="container lifetime, sampled from the host", window_s=monitor.window_s)
    try:
        write_json_atomic(path, summary)
    except OSError:
        pass
    return summary


def give_container_the_work_dir(work_dir: Path, user: str) -> None:
    """A root host writes spec.json as root (mode 0600): hand the folder to the container user so
    it can read the spec and write its result. A non-root host runs the container as itself."""
    if os.getuid() != 0:
        return
    uid, gid = (int(part) for part in user.split(":"))
    for path in [work_dir, *work_dir.iterdir()]:
        os.chown(path, uid, gid)


def save_logs(container: Any, log_path: Path, caps: tuple[int, int] | None = None) -> None:
    """Stream the container's stdout and stderr into the cell's log file as they come, capped
    as a local worker's log is (its first and last bytes kept, the cut said)."""
    head, tail_bytes = caps or log_caps()
    log = CappedLog(log_path, head, tail_bytes)
    stream = None
    try:
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        for chunk in stream:
            log.write(chunk)
    except Exception as exc:  # the container went away mid-stream: keep what we have
        log.write(f"\n[runner: log stream ended: {exc}]\n".encode())
    finally:
        if stream is not None:
            stream.close()
        log.close()
