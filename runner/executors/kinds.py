"""The kinds of executor a run can ask for, and making one. Adding an executor: its module, its
kind here, its capability flags (base.py); nothing outside executors/ names it."""

from __future__ import annotations

from ..environments import Flavour
from .base import Executor

KINDS = ("auto", "local", "docker", "ray")     # the CLI's --executor, [run] executor
IMAGE_KIND = "docker"       # runs Docker images where a command or a source needs one
PROCESS_KIND = "local"      # runs existing interpreters where the run's executor does not


def executor_class(kind: str) -> type[Executor]:
    """The class of a kind (imported only when asked for: ray and docker are heavy)."""
    if kind == "local":
        from .local import LocalExecutor

        return LocalExecutor
    if kind == "docker":
        from .docker import DockerExecutor

        return DockerExecutor
    if kind == "ray":
        from .ray import RayExecutor

        return RayExecutor
    raise ValueError(f"executor {kind!r} is not one of {', '.join(KINDS[1:])}")


def runs_images(kind: str) -> bool:
    """Whether executors of a kind ("auto" included: undecided) run Docker images."""
    return kind in KINDS[1:] and executor_class(kind).runs_images


def create(kind: str, flavour: Flavour, gpu: bool, ray_address: str | None = None) -> Executor:
    """An executor of `kind` (not "auto": auto.choose decides it first) for a host whose GPU
    `gpu` says; it connects to nothing yet. ExecutorUnavailable when its software is missing."""
    if kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(ray_address, flavour=flavour)
    return executor_class(kind)(flavour, gpu)
