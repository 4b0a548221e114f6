"""The kinds of executor a run can ask for, each registered once by its kind, and making one.

Adding an executor: its module (a subclass of base.Executor with its capability flags), one
`register` line below; nothing else names it (tests/test_layout.py: no module but this one makes
an executor by its class, and none outside executors/ tells executors apart by name). Its module
is imported only when its kind is asked for: docker and ray are heavy."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..environments import Flavour
from .base import Executor

AUTO = "auto"               # decided by auto.choose: not a kind of its own
IMAGE_KIND = "docker"       # runs Docker images where a command or a source needs one
PROCESS_KIND = "local"      # runs existing interpreters where the run's executor does not


@dataclass(frozen=True)
class Kind:
    """A kind of executor: its name (--executor, [run] executor) and where its class is."""

    name: str
    module: str             # the module that defines the class
    cls: str                # the Executor subclass


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    REGISTRY[kind.name] = kind


register(Kind("local", "runner.executors.local", "LocalExecutor"))
register(Kind("docker", "runner.executors.docker", "DockerExecutor"))
register(Kind("ray", "runner.executors.ray", "RayExecutor"))


def registered(kind: str) -> bool:
    return kind in REGISTRY


def choices() -> tuple[str, ...]:
    """What --executor and [run] executor may say: auto, then every registered kind."""
    return (AUTO, *REGISTRY)


def executor_class(kind: str) -> type[Executor]:
    """The class of a kind (its module imported now)."""
    if kind not in REGISTRY:
        raise ValueError(f"executor {kind!r} is not one of {', '.join(REGISTRY)}")
    found = getattr(importlib.import_module(REGISTRY[kind].module), REGISTRY[kind].cls)
    if not (isinstance(found, type) and issubclass(found, Executor)):
        raise TypeError(f"{REGISTRY[kind].module}.{REGISTRY[kind].cls} is not an Executor")
    return found


def runs_images(kind: str) -> bool:
    """Whether executors of a kind ("auto" included: undecided) run Docker images."""
    return registered(kind) and executor_class(kind).runs_images


def create(kind: str, flavour: Flavour, gpu: bool, ray_address: str | None = None) -> Executor:
    """An executor of `kind` (not "auto": auto.choose decides it first) for a host whose GPU
    `gpu` says, its cluster at `ray_address` where it places cells on one; it connects to
    nothing yet. ExecutorUnavailable when its software is missing."""
    return executor_class(kind).for_run(flavour, gpu, ray_address)
