"""The "auto" executor rule: one rule, for a run on one host (executor = "auto") and for every
Ray node choosing how to run its cells (DL_BENCH_NODE_EXECUTOR = auto)."""

from __future__ import annotations

from ..environments.docker_engine import DockerUnavailable, connect


def choose(gpu: bool) -> tuple[str, str]:
    """The "auto" rule: (kind, why). Docker is the GPU path: pinned images need an engine, and
    only pay off with a GPU; without either, local virtual environments."""
    if not gpu:
        return "local", "auto: no GPU found, so no Docker images are needed"
    try:
        connect(timeout=5).close()
    except DockerUnavailable as exc:
        why = str(exc).split(";")[0]   # the first clause; the fix is doctor's
        return "local", f"auto: a GPU was found, but {why}"
    return "docker", "auto: a GPU was found and a Docker engine answered"
