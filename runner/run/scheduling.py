"""Which cells run at once, and where: one lane per GPU, each cell pinned to its lane's GPU.

A lane is one place a cell runs at a time: a GPU of this host (local and docker executors), the
CPU (a host without GPUs, or a cell with device = "cpu"), or one of a Ray cluster's task slots
(Ray itself then picks the node and GPU). With one lane the plan runs in order in the calling
thread, exactly as a serial run; with several, GPU cells run concurrently, one per lane, and a
CPU cell runs alone: it waits until the running cells finish and nothing starts beside it (CPU
cells would disturb each other and the GPU cells' host threads). A data-parallel cell
(devices = N, docs/scaling.md) holds N lanes at once, joined into one: it starts when N are free
(the first ready entry waits for them; nothing smaller goes ahead of it, so it is never starved),
so no GPU ever holds two cells and no cell more GPUs than the run has.

Ctrl-C stops the run as in a serial run: the executors kill what is in flight, cells that did
not finish write nothing, every finished record is already stored (--resume goes on).
"""

from __future__ import annotations

import socket
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from collections.abc import Callable, Iterable

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.console import Console

from ..errors import user_text
from ..machine.hostinfo import Gpu

STOP_GRACE_S = 60.0              # after Ctrl-C: how long in-flight cells get to be killed
QUIET_REFRESH_HZ = 1.0           # the live display's redraws per second while cells run

Entry = TypeVar("Entry")


@dataclass(frozen=True)
class Lane:
    label: str                    # "GPU 0", "CPU", "ray 1"; joined: "GPU 0+1"
    gpu: Gpu | None = None        # the GPU its cells are pinned to (None: none, or Ray's pick)
    local: bool = True            # a lane of this host (False: a Ray slot; the node says where)
    # A lane of several (a data-parallel cell's): the lanes it joins; `gpu` is the first's.
    joined: tuple[Lane, ...] = ()

    @classmethod
    def join(cls, lanes: list[Lane]) -> Lane:
        if len(lanes) == 1:
            return lanes[0]
        first = lanes[0]
        label = first.label + "".join(f"+{lane.label.split()[-1]}" for lane in lanes[1:])
        return cls(label, first.gpu, first.local, tuple(lanes))

    @property
    def parts(self) -> tuple[Lane, ...]:
        return self.joined or (self,)

    @property
    def gpus(self) -> list[Gpu]:
        return [lane.gpu for lane in self.parts if lane.gpu is not None]

    def placement(self) -> dict[str, Any]:
        """Metadata keys of where a cell of this lane runs (a Ray slot: the node tells)."""
        if not self.local:
            return {}
        out: dict[str, Any] = {"node_name": socket.gethostname()}
        if self.gpu is not None:
            out["gpu_index"] = self.gpu.index
            if self.gpu.uuid:
                out["gpu_uuid"] = self.gpu.uuid
        if len(self.gpus) > 1:
            out["gpu_indices"] = [gpu.index for gpu in self.gpus]
        return out


CPU_LANE = Lane("CPU")


def _anyone(entry: Any) -> bool:
    return True


def _no_one(entry: Any) -> bool:
    return False


def _no_stop(entry: Any) -> str | None:
    return None


def _one_lane(entry: Any) -> int:
    return 1


@dataclass(frozen=True)
class Policy(Generic[Entry]):
    """What the lanes ask of each entry, decided once for a run (run/cells.py cell_policy);
    Lanes knows nothing else of what an entry is.

    label: its name on the display and in the lines; alone: it runs by itself, once the
    running entries have finished, and nothing starts beside it (a CPU cell); ready: it may
    start now (with several lanes; a later repeat waits for its cell's first, whose block size
    it takes), else the next ready entry goes ahead of it; gate: asked before it starts, why
    the run stops there (a budget), or None; width: the lanes it holds at once, joined (a
    data-parallel cell's devices)."""

    label: Callable[[Entry], str] = str
    alone: Callable[[Entry], bool] = _no_one
    ready: Callable[[Entry], bool] = _anyone
    gate: Callable[[Entry], str | None] = _no_stop
    width: Callable[[Entry], int] = _one_lane


class _CellsOnly(BarColumn):
    """The bar, shown on the overall row only (the lanes' rows say what each lane does)."""

    def render(self, task):
        return "" if task.fields.get("lane") else super().render(task)


class _CountCellsOnly(MofNCompleteColumn):
    def render(self, task):
        return "" if task.fields.get("lane") else super().render(task)


def gpu_lanes(parallel: int | str, gpus: list[Gpu], asked: str) -> tuple[list[Lane], str]:
    """(lanes, the reason shown in the run's first lines) for the local and docker executors."""
    if not gpus:
        return [CPU_LANE], "no GPU: one cell at a time"
    count = len(gpus) if parallel == "auto" else min(int(parallel), len(gpus))
    lanes = [Lane(f"GPU {g.index}", g) for g in gpus[:count]]
    found = f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''} visible"
    return lanes, f"{asked}: {found}"


def lanes_text(lanes: list[Lane]) -> str:
    if len(lanes) == 1:
        return "1 cell at a time" + (f", on {lanes[0].label}" if lanes[0].gpu else "")
    kind = "one per GPU" if all(lane.gpu for lane in lanes) else "task slots"
    return f"{len(lanes)} cells at once ({kind}); CPU cells one at a time, alone"


class Lanes:
    """Runs entries on lanes; shows what each lane is doing."""

    def __init__(self, lanes: list[Lane], console: Console):
        self.lanes = lanes
        self.console = console
        self.stop = threading.Event()     # set on Ctrl-C: a cell that finishes now is dropped
        self.stopped: str | None = None   # why `gate` stopped the run before an entry

    def run(self, entries: Iterable[Entry], policy: Policy[Entry],
            run_one: Callable[[Entry, Lane, Callable[[str], None]], Any],
            done: Callable[[Entry, Any, Progress], None],
            interrupt: Callable[[], None]) -> None:
        """run_one(entry, lane, show) -> result, in a thread of its own when several lanes;
        done(entry, result, progress) in the calling thread, in the order cells finish;
        interrupt() on Ctrl-C, to kill what runs. The policy says which entry goes where and
        when (Policy); one lane runs the entries in their order. When policy.gate stops the
        run, nothing more starts, the running entries finish, and `stopped` says why."""
        entries = list(entries)
        # Redrawn once a second, not rich's ten: a cell's timed window shares the host with
        # this process (a live display at 10 Hz took 1.4 % of a CPU against 0.6 % without one).
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), _CellsOnly(),
                      _CountCellsOnly(), TimeElapsedColumn(), console=self.console,
                      refresh_per_second=QUIET_REFRESH_HZ) as progress:
            bar = progress.add_task("cells", total=len(entries))
            if len(self.lanes) == 1:
                self._serial(entries, policy, run_one, done, progress, bar)
            else:
                self._parallel(entries, policy, run_one, done, interrupt, progress, bar)

    def _serial(self, entries, policy, run_one, done, progress, bar) -> None:
        lane = self.lanes[0]
        for entry in entries:
            self.stopped = policy.gate(entry)
            if self.stopped is not None:
                return
            where = CPU_LANE if policy.alone(entry) else lane
            progress.update(bar, description=user_text(policy.label(entry)))

            def show(text: str, entry=entry) -> None:
                progress.update(bar, description=user_text(f"{policy.label(entry)}: {text}"))

            done(entry, run_one(entry, where, show), progress)
            progress.advance(bar)

    @staticmethod
    def _next_start(pending, running, free, policy: Policy) -> tuple[Any, Lane] | None:
        """The next entry to start now and its lane, or None: the first ready entry (the first
        of all when nothing runs: nothing could make the others ready) on the first free lane
        (its first width(entry) free lanes, joined, in order); a CPU cell alone, once the
        running cells have finished."""
        entry = next((e for e in pending if policy.ready(e)), None if running else pending[0])
        if entry is None:
            return None                     # every entry waits for a running one
        if any(lane is CPU_LANE for _, lane in running.values()):
            return None                     # a CPU cell runs alone
        if policy.alone(entry):
            return None if running else (entry, CPU_LANE)   # after the GPU cells finish
        wanted = policy.width(entry)
        if not running and len(free) < wanted:      # the plan makes such a cell NA (devices.py)
            raise RuntimeError(f"a cell wants {wanted} lanes, the run has {len(free)}")
        return (entry, Lane.join(free[:wanted])) if len(free) >= wanted else None

    def _parallel(self, entries, policy, run_one, done, interrupt, progress, bar) -> None:
        rows = {lane: progress.add_task(user_text(f"{lane.label}: idle"), total=None, lane=True)
                for lane in [*self.lanes, CPU_LANE]}
        progress.update(rows[CPU_LANE], visible=False)
        pending = deque(entries)
        running: dict[Future, tuple[Any, Lane]] = {}
        free = list(self.lanes)
        pool = ThreadPoolExecutor(max_workers=len(self.lanes), thread_name_prefix="lane")

        def start(entry: Any, lane: Lane) -> None:
            row = rows[lane.parts[0]]
            progress.reset(row, description=user_text(f"{lane.label}: {policy.label(entry)}"),
                           visible=True)

            def show(text: str) -> None:
                progress.update(row, description=user_text(
                    f"{lane.label}: {policy.label(entry)}: {text}"))

            running[pool.submit(run_one, entry, lane, show)] = (entry, lane)

        try:
            while pending or running:
                while pending:
                    chosen = self._next_start(pending, running, free, policy)
                    if chosen is None:
                        break
                    entry, lane = chosen
                    self.stopped = policy.gate(entry)
                    if self.stopped is not None:
                        pending.clear()             # the running ones finish; none starts
                        break
                    pending.remove(entry)
                    if lane is not CPU_LANE:
                        for part in lane.parts:
                            free.remove(part)
                    start(entry, lane)
                finished, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    entry, lane = running.pop(future)
                    result = future.result()        # a bug in a lane stops the run
                    if lane is CPU_LANE:
                        progress.update(rows[lane], visible=False)
                    else:
                        free.extend(lane.parts)
                        free.sort(key=self.lanes.index)
                        progress.update(rows[lane.parts[0]],
                                        description=user_text(f"{lane.parts[0].label}: idle"))
                    done(entry, result, progress)
                    progress.advance(bar)
        except BaseException:
            # Ctrl-C (or a bug): stop starting, kill what runs, let the lanes drop their cells.
            self.stop.set()
            interrupt()
            wait(list(running), timeout=STOP_GRACE_S)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
