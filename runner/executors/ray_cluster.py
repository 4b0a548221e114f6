"""Joining a Ray cluster from the driver: Ray imported only when asked for, its version (token
authentication), the address tried before Ray retries it for minutes, the runner's code staged
for the nodes, the cluster's figures, and the GCS probed to tell a lost task from a lost
cluster."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import threading
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from .. import settings
from ..paths import IMAGES_DIR, REPO_ROOT
from .base import ExecutorUnavailable

ADDRESS_ENV = "RAY_ADDRESS"
MIN_RAY = (2, 52)                           # token authentication
AUTH_MODE_ENV = "RAY_AUTH_MODE"


class RayUnavailable(ExecutorUnavailable):
    """Ray is not installed or no cluster answers; the message is one line for the user."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("executor 'ray' needs Ray on this machine: pip install -e '.[ray]' "
                             "(see the README's cluster section)") from None
    return ray


def retries_setting() -> int:
    return int(settings.get(settings.RAY_RETRIES))


def check_version(version: str) -> None:
    """Token authentication (RAY_AUTH_MODE=token) came with Ray 2.52."""
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < MIN_RAY:
        raise RayUnavailable(f"Ray {version} is older than {'.'.join(map(str, MIN_RAY))}, the "
                             "first with token authentication: pip install -e '.[ray]'")


def authentication() -> str:
    """Token authentication on the driver, and on the local instance it starts (Ray makes and
    keeps its token in ~/.ray/auth_token): RAY_AUTH_MODE=token unless the user set the mode.
    What the run's first lines say about it."""
    mode = os.environ.setdefault(AUTH_MODE_ENV, "token")
    if mode == "token":
        return f"{AUTH_MODE_ENV}=token"
    return f"{AUTH_MODE_ENV}={mode}: no token authentication (anyone who reaches the cluster " \
           "can run code on it)"


def address_problem(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at a cluster address (HOST:PORT or ray://HOST:PORT), tried with a
    plain TCP connection first: ray.init would retry an unreachable address for minutes."""
    target = address.split("://", 1)[-1].rstrip("/")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return None                      # "auto" and the like: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    return None


def join(ray: Any, address: str | None, staged: Path, forwarded: dict[str, str]) -> None:
    """ray.init: join the cluster at `address` (none: start a local instance), this checkout's
    code staged in `staged` as the job's working_dir, `forwarded` set on every node;
    RayUnavailable (one line) when no cluster answers."""
    problem = address_problem(address) if address else None
    if problem:
        raise RayUnavailable(f"no Ray cluster answers at {address} ({problem}); start one "
                             "(ray up, or ray start --head) or fix --ray-address / RAY_ADDRESS")
    runtime_env = {"working_dir": str(stage_code(staged)), "env_vars": forwarded}
    try:
        with our_sigterm_handler():
            ray.init(address=address or "local", runtime_env=runtime_env, log_to_driver=False,
                     logging_level=logging.WARNING,
                     **({} if address else {"include_dashboard": False}))
    except (ConnectionError, RuntimeError, ValueError) as exc:
        what = f"no Ray cluster answers at {address}" if address else \
            "a local Ray instance could not start"
        hint = " (with token authentication the driver needs the cluster's token: " \
            "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)" \
            if address and os.environ.get(AUTH_MODE_ENV) == "token" else ""
        raise RayUnavailable(f"{what}: {first_line(exc)}{hint}") from None


def stage_code(folder: Path) -> Path:
    """What every node needs of this checkout, copied into `folder`: the runner package (host
    and worker code) and the image folders (locks, Dockerfiles). Shipped as the job's
    working_dir, so a node runs exactly the driver's code and locks."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "runner", folder / "runner", ignore=ignore)
    shutil.copytree(IMAGES_DIR, folder / "images", ignore=ignore)
    return folder


class ClusterLost(Exception):
    """The cluster's GCS no longer accepts connections."""


def gcs_address(ray: Any) -> str | None:
    """HOST:PORT of the cluster's GCS, which the driver probes to tell a lost task from a lost
    cluster."""
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:  # an older Ray: no probe, Ray's own errors decide
        return None


@contextlib.contextmanager
def our_sigterm_handler() -> Iterator[None]:
    """ray.init replaces the driver's SIGTERM handler with sys.exit: keep the runner's, which
    stops the run as Ctrl-C does (cells cancelled, records kept, the manifest finalised)."""
    main = threading.current_thread() is threading.main_thread()
    ours = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and ours is not None:
            signal.signal(signal.SIGTERM, ours)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def cluster_facts(ray: Any) -> dict[str, Any]:
    nodes = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        nodes.append({"node_ip": node.get("NodeManagerAddress"),
                      "node_name": node.get("NodeManagerHostname"),
                      "ray_node_id": node.get("NodeID"),
                      "cpus": int(resources.get("CPU", 0)), "gpus": int(resources.get("GPU", 0))})
    cpus = [n["cpus"] for n in nodes if n["cpus"]]
    return {"nodes": nodes, "gpus": sum(n["gpus"] for n in nodes),
            "cpus": sum(n["cpus"] for n in nodes), "cpus_per_node": min(cpus) if cpus else 1,
            "ray_version": ray.__version__}
