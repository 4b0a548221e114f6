"""A run's setup: its decisions, made once and shown in its first lines — which executor runs the
cells and why, which flavour of the locks and why, where cells run at once (the lanes) and why,
the lock of each derived stack — and which executor runs each environment's source."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from ..environments import Flavour, Source, channels, decide_flavour, folder_flavour, stacks
from ..environments.stacks import Stack
from ..errors import UsageError
from ..executors import auto, kinds
from ..executors.base import Executor, ExecutorUnavailable
from ..machine import hostinfo
from ..schema.matrix import Cell, Matrix
from ..schema.values import local_path
from . import scheduling
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
    # environment name → its derived stack, resolved for the flavour it is built in (the
    # pipeline's resolve_stacks, or a reproduction's recorded locks)
    stacks: dict[str, Stack] = field(default_factory=dict)

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

    def source_of(self, cell: Cell) -> Source:
        """Where a cell's interpreter comes from (its environment's derived stack, once
        resolved)."""
        stack = self.stacks.get(cell.environment)
        return stack.source() if stack is not None else Source.of(cell.image, cell.python)

    def environment_source(self, matrix: Matrix, name: str) -> Source:
        stack = self.stacks.get(name)
        env = matrix.spec.environments[name]
        return stack.source() if stack is not None else Source.of(env.image, env.python)

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
        return cell.axes.device == "cpu" and lanes[0].local and lanes[0].gpu is not None

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
    if kind == kinds.AUTO:
        kind, reason = auto.choose(gpu)
    if not kinds.registered(kind):
        *others, last = kinds.choices()
        raise UsageError(f"executor {kind!r} is not available (use {', '.join(others)} or "
                         f"{last})")
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


def noted(on_note: Callable[[str], None], name: str, line: str) -> None:
    on_note(f"{name}: {line}")


def resolve_stacks(setup: Setup, matrix: Matrix, names: list[str], recorded_in: Path | None,
                   on_note: Callable[[str], None]) -> None:
    """The lock of each derived environment in `names` for the flavour it is built in: the one a
    run folder recorded (`recorded_in`: a resumed run's), else resolved or found in the cache
    (a channel's build chosen, a local wheel or tree built). UsageError (one line, the
    resolver's reason) for a stack that cannot be had — before anything is built."""
    for name in names:
        env = matrix.spec.environments[name]
        if not env.derived or name in setup.stacks or env.image is None:
            continue
        where = f"{matrix.path}: environments.{name}"
        executor = setup.executor_for(Source.of(env.image))
        if not executor.on_this_host:
            raise UsageError(f"{where}: a derived stack (pins, packages, channel) runs with the "
                             f"local or docker executor; the {setup.executor.name} executor's "
                             "nodes build the image folders' own locks only")
        if any(local_path(Requirement(p)) for p in env.pins) and not executor.builds_venvs:
            raise UsageError(f"{where}: a local wheel or source tree (a pin NAME @ PATH) is "
                             f"installed into a local environment: run it with the local "
                             f"executor, not {executor.name}")
        flavour = folder_flavour(setup.flavour, env.image)
        recorded = stacks.run_folder_lock(recorded_in, name, flavour) if recorded_in else None
        follow = None if env.channel_name is None else stacks.Follow(
            env.channel_name, env.date, channels.followed(env.follow, env.api))
        try:
            if recorded is not None and recorded.is_file():
                stack = stacks.recorded(env.image, flavour, env.pins, env.packages, recorded)
            else:
                stack = stacks.resolve(env.image, flavour, env.pins, env.packages,
                                       on_line=functools.partial(noted, on_note, name),
                                       follow=follow, base=matrix.path.parent)
        except stacks.StackError as exc:
            channel = [] if follow is None else [
                f"{follow.channel} {follow.date or 'newest'} ({', '.join(follow.names)})"]
            label = " + ".join((f"images/{env.image}", *env.pins, *env.packages, *channel))
            raise UsageError(f"{where}: {label} ({flavour}) cannot be resolved: {exc}") from None
        setup.stacks[name] = stack
