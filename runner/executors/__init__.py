"""Executors: where a cell's worker runs. Every executor has the same small shape (Executor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from ..environments import Source
from ..results.records import Outcome


@dataclass
class Prepared:
    """An environment ready to run cells, and what the record should say about it."""

    key: str                                                   # Source.key: image or python:PATH
    uses: str = ""                                             # the lock, image tag or interpreter
    flavour: str | None = None                                 # cpu | cuda; None: an existing one
    python: Path | None = None                                 # the interpreter (local cells)
    metadata: dict[str, Any] = field(default_factory=dict)  # lock_sha256, image_id, env_path, ...
    warnings: list[str] = field(default_factory=list)         # shown once, kept in the manifest
    error: str | None = None                                   # preparation failed: cells fail


@dataclass
class Attempt:
    """One cell × repeat to run: the spec file, where the worker writes, where output goes."""

    spec_path: Path
    result_path: Path
    log_path: Path
    work_dir: Path
    env: dict[str, str]
    timeout: float
    wants_gpu: bool = True          # device = "auto" or "gpu": the GPU, where the host has one
    gpu: str | None = None          # the GPU it is pinned to (UUID or index); None: the default
    # Where it ran, as metadata keys (node_name, gpu_index, gpu_uuid, ...): the lane's GPU, and
    # what an executor that picks the machine itself (ray) learns from the node.
    placement: dict[str, Any] = field(default_factory=dict)
    on_status: Callable[[str], None] = lambda text: None   # progress: where it is, what it does


class Executor(Protocol):
    name: str
    # Why this executor can run no more cells (its Docker engine or Ray cluster is gone), else
    # None: the run stops after the cell that found out (run.stop_if_lost).
    lost: str | None

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared: ...

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome: ...

    def interrupt(self) -> None:
        """Ctrl-C during a parallel run: kill every worker in flight now (called from the main
        thread while run() blocks in others; each of those then returns)."""

    def close(self) -> None: ...
