"""A run's setup: its decisions, made once and shown in its first lines — which executor runs the
cells and why, which flavour of the locks and why, where cells run at once (the lanes) and why —
and which executor runs each environment's source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import hostinfo, scheduling
from .environments import Flavour, Source, decide_flavour
from .errors import UsageError
from .executors import auto, kinds
from .executors.base import Executor, ExecutorUnavailable
from .matrix import Cell, Matrix
from .scheduling import Lane


@dataclass
class Setup:
    """The executor of the run (and why). An executor that does not run a source itself gets a
    helper: existing interpreters run as local processes, images named by digest in Docker."""

    executor: Executor
    reason: str
    gpu: bool = False                     # this host has a GPU
    parallel: int | str = "auto"          # [run] parallel or --parallel
    parallel_asked: str = "[run] parallel = 'auto'"
    _lanes: tuple[list[Lane], str] | None = None
    _local: Executor | None = None        # runs existing interpreters the executor does not
    _images: Executor | None = None       # runs images named by digest the executor does not
    clocks: dict[str, Any] | None = None  # [run] lock_clocks: what was locked (gpustate)

    @property
    def flavour(self) -> Flavour:
        return self.executor.flavour

    def executor_for(self, source: Source) -> Executor:
        if source.existing and not self.executor.runs_existing:
            if self._local is None:
                self._local = kinds.create(kinds.PROCESS_KIND, self.flavour, self.gpu)
            return self._local
        if source.by_digest and not self.executor.runs_images:
            # An image named by digest runs only as that image: in Docker, whatever the run's
            # executor for image folders.
            if self._images is None:
                self._images = kinds.create(kinds.IMAGE_KIND, self.flavour, self.gpu)
            return self._images
        return self.executor

    def lanes(self) -> tuple[list[Lane], str]:
        """Where cells run at once, and why: this host's GPUs, or the slots of an executor that
        places cells itself (a Ray cluster's)."""
        if self._lanes is None:
            slots = self.executor.slots(self.parallel)
            if slots is not None:
                count, found = slots
                lanes = [Lane(f"{self.executor.name} {i + 1}", local=False) for i in range(count)]
                self._lanes = lanes, f"{self.parallel_asked}: {found}"
            else:
                gpus = hostinfo.visible_gpus(hostinfo.gpus())
                self._lanes = scheduling.gpu_lanes(self.parallel, gpus, self.parallel_asked)
        return self._lanes

    def gpu_device_ids(self) -> list[str]:
        """The GPUs of this host the run's lanes use (none on a CPU host or a cluster)."""
        return [lane.gpu.device_id for lane in self.lanes()[0] if lane.gpu is not None]

    def alone(self, cell: Cell) -> bool:
        """A CPU cell on a host whose lanes are GPUs runs alone (Ray keeps it alone on its node
        by the resources it asks for)."""
        lanes, _ = self.lanes()
        return cell.axes["device"] == "cpu" and lanes[0].local and lanes[0].gpu is not None

    def would_use(self, source: Source) -> tuple[str, str | None, str]:
        """(executor name, flavour, what it uses) without building anything."""
        executor = self.executor_for(source)
        flavour, uses = executor.would_use(source)
        return executor.name, flavour, uses

    def executors(self) -> list[Executor]:
        found = [e for e in (self.executor, self._local, self._images) if e is not None]
        return list({id(e): e for e in found}.values())

    def interrupt(self) -> None:
        for executor in self.executors():
            executor.interrupt()

    def close(self) -> None:
        for executor in self.executors():
            executor.close()


def source_of(cell: Cell) -> Source:
    return Source.of(cell.image, cell.python)


def choose_setup(matrix: Matrix | None, requested: str | None,
                 parallel: int | str | None = None, ray_address: str | None = None,
                 flavour: Flavour | None = None) -> Setup:
    """The setup of a run of `matrix` (None: of no matrix, for doctor); `requested` is
    --executor. `flavour` forces the locks' flavour (a reproduction uses the recorded one).
    An executor that places cells on a cluster joins it now: UsageError when none answers."""
    facts = hostinfo.gpu_facts()
    gpu = bool(facts.get("gpu_count"))
    flavour = flavour or decide_flavour(facts.get("gpu_count") or 0, facts.get("gpu_name"))
    kind = requested or (matrix.spec.run.executor if matrix is not None else "auto")
    reason = f"--executor {kind}" if requested else f"[run] executor = {kind!r}"
    if parallel is not None:
        asked = f"--parallel {parallel}"
    else:
        parallel = matrix.spec.run.parallel if matrix is not None else "auto"
        asked = f"[run] parallel = {parallel!r}"
    if kind == "auto":
        kind, reason = auto.choose(gpu)
    if kind not in kinds.KINDS:
        raise UsageError(f"executor {kind!r} is not available (use auto, local, docker or ray)")
    if not kinds.executor_class(kind).on_this_host:
        refuse_digest_images(matrix, kind)
    try:
        executor = kinds.create(kind, flavour, gpu, ray_address)
        executor.cluster()          # a cluster joined now: one that does not answer stops here
    except ExecutorUnavailable as exc:
        raise UsageError(str(exc)) from None
    where = f"; {executor.where}" if executor.where else ""
    return Setup(executor, reason + where, gpu, parallel, asked)


def refuse_digest_images(matrix: Matrix | None, kind: str) -> None:
    """An image named by digest runs on this host (in Docker): not with an executor that
    places cells on other machines."""
    if matrix is None:
        return
    by_digest = [n for n, e in matrix.spec.environments.items()
                 if e.image is not None and Source.of(e.image).by_digest]
    if by_digest:
        raise UsageError(f"{matrix.path}: environments.{by_digest[0]}.image: an image named by "
                         f"digest runs with the local or docker executor, not {kind}")
