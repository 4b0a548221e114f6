"""The one executor contract: what every executor offers its callers, and what they share.

An executor prepares environments (`prepare`) and runs one cell × repeat in one of them (`run`,
an Attempt in, an Outcome out: what it saw of the worker process or container). Callers — the
pipeline, doctor, reproduce — read its capability flags, never its name, to decide what differs
between executors. Adding an executor: subclass Executor, set the flags, implement `would_use`,
`prepare` and `run` (and `interrupt`, `close` where something can be left behind; `for_run` where
it is made from more than a flavour and the host's GPU), and register its kind in
executors/kinds.py.

Shared here: the in-flight set Ctrl-C reaches (InFlight), the log's tail and the runner's notes
in it, the GPU hand-off to a worker, and spec.json, written in one place (write_spec) and read
back by no executor (an Attempt carries the spec itself).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar
from collections.abc import Callable, Iterator

from ..environments import Flavour, Source
from ..worker.protocol import GPU_GIVEN_ENV, CellSpec, write_json_atomic

SPEC_FILE, RESULT_FILE = "spec.json", "result.json"     # in the attempt's work folder
T = TypeVar("T")


@dataclass
class Outcome:
    """What an executor saw of one worker process or container."""

    returncode: int | None
    timed_out: bool
    wall_s: float | None
    oom_killed: bool = False
    log_tail: str = ""
    host_gpu: dict[str, Any] | None = None  # docker cells: NVML figures sampled from the host


@dataclass
class Prepared:
    """An environment ready to run cells, and what the record should say about it."""

    key: str                                                   # Source.key
    uses: str = ""                                             # the lock, image tag or interpreter
    flavour: str | None = None                                 # cpu | cuda; None: an existing one
    python: Path | None = None                                 # the interpreter (local cells)
    metadata: dict[str, Any] = field(default_factory=dict)  # lock_sha256, image_id, env_path, ...
    warnings: list[str] = field(default_factory=list)         # shown once, kept in the manifest
    error: str | None = None                                   # preparation failed: cells fail


@dataclass(frozen=True)
class GpuRequest:
    """A cell that runs on the GPU where there is one (device "auto" or "gpu"), decided once
    where the cell is placed: the GPU its lane gives it. device_id None: the executor's default
    GPU (no lane GPU: a Ray slot, whose node says which). A data-parallel cell (devices = N)
    holds `count` GPUs: its lane's (device_id and `others`), or, on a Ray slot, the node's."""

    device_id: str | None = None     # a GPU UUID or NVML index (hostinfo.Gpu.device_id)
    others: tuple[str, ...] = ()     # a data-parallel cell's other GPUs, in its lane's order
    count: int = 1                   # GPUs the cell holds

    @property
    def device_ids(self) -> list[str]:
        return [self.device_id, *self.others] if self.device_id is not None else []

    @property
    def visible(self) -> str | None:
        """CUDA_VISIBLE_DEVICES for the worker: its GPUs, comma-separated (None: no names)."""
        return ",".join(self.device_ids) or None


@dataclass
class Attempt:
    """One cell × repeat to run: its spec, its work folder (spec.json in, result.json out), its
    log, the worker's variables from the matrix, its timeout and the GPU it asks for."""

    spec: CellSpec
    work_dir: Path
    log_path: Path
    env: dict[str, str]
    timeout: float
    gpu: GpuRequest | None = None    # None: a CPU cell (device = "cpu"): no GPU is handed over
    # Where it ran, as metadata keys (node_name, gpu_index, gpu_uuid, ...): the lane's GPU, and
    # what an executor that places cells itself (ray) learns from the node.
    placement: dict[str, Any] = field(default_factory=dict)
    on_status: Callable[[str], None] = lambda text: None   # progress: where it is, what it does
    # A user workload's cell: the run folder's workloads/, its code's staged read-only copies,
    # which the executor makes the worker's DL_BENCH_WORKLOADS (runner/worker/user_code.py).
    staged_code: Path | None = None

    @property
    def spec_path(self) -> Path:
        return self.work_dir / SPEC_FILE

    @property
    def result_path(self) -> Path:
        return self.work_dir / RESULT_FILE

    @property
    def key(self) -> str:
        """<cell id>-r<repeat>: the attempt's name in labels and logs."""
        return f"{self.spec.cell_id}-r{self.spec.repeat}"


def write_spec(attempt: Attempt) -> None:
    """spec.json in the attempt's work folder, naming its result.json there: the only place a
    spec file is written (the host's, and a Ray node's own copy)."""
    spec = dataclasses.replace(attempt.spec, result_path=str(attempt.result_path))
    write_json_atomic(attempt.spec_path, spec.to_dict())


class ExecutorUnavailable(Exception):
    """The executor cannot be used here (its software is missing, no cluster answers); the
    message is one line for the user."""


class Executor:
    """Where cells run. The flags say what differs between executors; callers read them."""

    name = ""
    # Cells run on this host: its GPUs are the lanes, its clocks can be locked, its machine
    # profile applies. False: the executor places each cell on a machine of its own choosing.
    on_this_host = True
    # Runs existing interpreters (python = ...) itself; otherwise the local executor runs them.
    runs_existing = False
    # Runs Docker images (ImageExecutor): images named by digest go to it, `reproduce` makes it
    # run the recorded image, doctor requires an engine, `build --push` and `export` use it.
    runs_images = False
    # Builds image folders' locks into virtual environments on this host (doctor checks uv).
    builds_venvs = False

    flavour: Flavour

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False) -> None:
        raise NotImplementedError

    @classmethod
    def for_run(cls, flavour: Flavour, gpu: bool, address: str | None = None) -> Executor:
        """An executor of this kind for a run (executors/kinds.py `create`): on a host whose
        GPU `gpu` says, in `flavour`; `address`: the cluster of an executor that places cells
        on one (the others have none)."""
        return cls(flavour, gpu)

    # Why this executor can run no more cells (its Docker engine or Ray cluster is gone), else
    # None: the run stops after the cell that found out.
    lost: str | None = None

    @property
    def where(self) -> str:
        """Where the cells run when not on this host, for the run's first lines (a cluster's
        address and how the driver joins it); empty for this host."""
        return ""

    def would_use(self, source: Source) -> tuple[str | None, str]:
        """(flavour, what it uses: a lock, an image, an interpreter) without building anything:
        for the plan, the first lines and the manifest."""
        raise NotImplementedError

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        raise NotImplementedError

    def is_ready(self, source: Source) -> bool | None:
        """Whether `prepare` would find the source's environment built (nothing to build), for
        the estimate before a run; None when this executor cannot tell without building."""
        return None

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        raise NotImplementedError

    def interrupt(self) -> None:
        """Ctrl-C during a parallel run: kill every worker in flight now (called from the main
        thread while run() blocks in others; each of those then returns)."""

    def close(self) -> None:
        """The run is over: give back what the executor holds (connections, a cluster)."""

    def slots(self, parallel: int | str) -> tuple[int, str] | None:
        """An executor that places cells itself: how many it keeps in flight, and why. None:
        cells run on this host's lanes (one per visible GPU)."""
        return None

    def cluster(self) -> dict[str, Any] | None:
        """The machines cells run on when they are not this host: nodes, GPUs, CPUs (a
        placing executor's); None for this host."""
        return None

    def built_lock_sha256(self, prepared: Prepared) -> str | None:
        """The lock hash the built environment itself carries (a venv's completion marker, an
        image's label), to check it against the lock asked for; None when it carries none."""
        return None

    def placement_manifest(self) -> dict[str, Any]:
        """What the manifest's parallel entry adds about where cells were placed (a cluster's
        address and figures); nothing for this host."""
        return {}


class ImageExecutor(Executor):
    """An executor that runs Docker images (runs_images): what `build --push`, `export` and
    `reproduce` ask of it beyond the contract."""

    runs_images = True

    def client(self) -> Any:
        """The docker SDK client of its engine (DockerUnavailable when none answers)."""
        raise NotImplementedError

    def image(self, source_key: str) -> Any:
        """The image a prepared environment runs (the engine's object)."""
        raise NotImplementedError

    def run_exact_image(self, source_key: str, image: str,
                        metadata: dict[str, Any] | None = None) -> None:
        """Run this environment's cells in exactly `image` (an id, or REGISTRY/NAME@sha256:…)
        instead of its recipe's; `metadata` is what its records carry beyond the engine's."""
        raise NotImplementedError

    def push(self, source: Source, registry: str) -> dict[str, Any]:
        """Push a prepared image folder's image to `registry`: the images.json entry naming it
        by digest (images.ImageError when the registry refuses)."""
        raise NotImplementedError


def as_image_executor(executor: Executor) -> ImageExecutor:
    """The executor as one that runs Docker images: what `build --push` and `export` chose by
    its `runs_images` flag."""
    if not isinstance(executor, ImageExecutor):
        raise TypeError(f"the {executor.name} executor runs no Docker images")
    return executor


def given_gpu(attempt: Attempt, host_has_gpu: bool) -> GpuRequest | None:
    """The GPU an attempt is handed: its request where the host has a GPU, else none."""
    return attempt.gpu if host_has_gpu else None


def gpu_hand_off() -> dict[str, str]:
    """What tells a worker it was given a GPU: a framework that cannot see it then fails the
    cell (no_gpu) instead of measuring the CPU, device = "auto" included."""
    return {GPU_GIVEN_ENV: "1"}


class InFlight(Generic[T]):
    """What an executor has in flight (worker processes, containers, Ray tasks), so that
    interrupt() — called from the main thread while run() blocks in lane threads — reaches
    every one of them."""

    def __init__(self) -> None:
        self._items: set[T] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def holding(self, item: T) -> Iterator[T]:
        with self._lock:
            self._items.add(item)
        try:
            yield item
        finally:
            with self._lock:
                self._items.discard(item)

    def snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log (from its last 16 KiB): the crash text of a record."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 16384))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def note_in_log(path: Path, text: str) -> None:
    """A line of the runner's own in a worker's log: `[runner: text]`."""
    append_to_log(path, f"[runner: {text}]\n")


def append_to_log(path: Path, text: str) -> None:
    """Append to a worker's log, never through a symbolic link planted at its name: the log is
    the runner's, so the link is removed and the log made in its place."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        path.unlink()
        fd = os.open(path, flags | os.O_EXCL, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as log:
        log.write(text)


def write_crashed_result(attempt: Attempt, error: str) -> None:
    """The result of an attempt whose worker could not report one (the engine or cluster did
    not run it): crashed, with why."""
    write_json_atomic(attempt.result_path, {"schema": 1, "status": "crashed", "error": error})
