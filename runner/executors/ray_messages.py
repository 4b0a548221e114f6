"""What the Ray driver (ray.py) and its tasks on the nodes (ray_node.py) send each other, typed:
a task's arguments and its return values. Ray pickles them; the runner's code travels with the
job, so both sides hold these classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..environments import Source
from ..worker.protocol import CellSpec
from .base import Outcome


@dataclass(frozen=True)
class PrepareRequest:
    """Build (or find) one environment on the node the task is pinned to."""

    source: Source
    locks: dict[str, str]               # flavour → the driver's lock sha256
    node_executor: str                  # DL_BENCH_NODE_EXECUTOR: auto | local | docker


@dataclass(frozen=True)
class PrepareReply:
    error: str | None = None            # the node cannot run the environment's cells: why
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CellRequest:
    """One cell × repeat to run on whichever node Ray places the task."""

    spec: CellSpec
    source: Source
    locks: dict[str, str]
    env: dict[str, str]                 # the worker's variables from the matrix
    timeout: float
    wants_gpu: bool                     # a GPU cell: the node hands it the GPUs Ray gave
    node_executor: str
    staged_code: dict[str, bytes] | None = None     # a user workload's files, name → bytes


@dataclass(frozen=True)
class Placed:
    """The task's first reply: where it runs (so that a task lost later can still be placed)."""

    placement: dict[str, Any]


@dataclass(frozen=True)
class CellReply:
    """The task's last reply: what the node's executor saw, the worker's result.json as it
    wrote it (checked by the driver, as a local run's), its log and the node's facts; or, when
    the node's own code failed, only the error and its traceback."""

    outcome: Outcome | None = None
    result: str | None = None
    log: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
