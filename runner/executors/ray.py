"""The Ray executor (the driver's side): each cell × repeat is one Ray task, on a cluster of GPU
machines.

Ray only schedules. A task asks for one GPU (a CPU cell, or any cell on a cluster without GPUs,
asks for all CPUs of a node, so it runs alone there) and, on the node it lands on, runs the
existing local or docker executor (ray_node.py): the node builds exactly the lock's environment
or image itself (cached as on any host), checks its lock hash against the driver's, and runs the
worker pinned to the GPU Ray gave the task. Ray is never installed inside the framework
environments.

No shared file system: the runner's code and the image folders travel with the job (Ray's
`working_dir`, staged from this checkout: ray_cluster.py), the spec goes out in the task's
arguments, and the worker's result, its log and the node's facts come back as the task's return
values (each typed: ray_messages.py); the driver stores them exactly as a local run does. A task whose process or node is lost
is submitted again, at most DL_BENCH_RAY_RETRIES times (Ray places it on a node that is alive),
then the cell is recorded as crashed with each loss named.

`ray` is imported lazily: the runner works without it until this executor is asked for.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .. import settings
from ..environments import (LOCKS, Flavour, Source, folder_flavour, lock_path,
                            lock_sha256)
from ..worker.protocol import write_text_atomic
from .base import (Attempt, Executor, InFlight, Outcome, Prepared, append_to_log, log_tail,
                   note_in_log, write_crashed_result)
from .ray_cluster import (ADDRESS_ENV, ClusterLost, RayUnavailable, address_problem,
                          authentication, check_version, cluster_facts, first_line, gcs_address,
                          import_ray, join, retries_setting)
from .ray_messages import CellReply, CellRequest, Placed, PrepareReply, PrepareRequest
from .ray_node import staged_sources, prepare_on_node, run_on_node, where

# The driver's settings every node must share (the base image its Docker builds start from, a
# forced flavour, a container's or local cell's memory limit, the node executor, what workers
# inherit, log caps).
FORWARDED_ENV = (settings.BASE_IMAGE, settings.DOCKER_MEMORY, settings.LOCAL_MEMORY, settings.FLAVOUR,
                 settings.NODE_EXECUTOR, settings.INHERIT_ENV, settings.LOG_HEAD_MB, settings.LOG_TAIL_MB)
NODE_FLAVOUR = Flavour("node", "each Ray node: cuda where it has an NVIDIA GPU, else cpu")
CANCEL_GRACE_S = 30.0                       # Ctrl-C: a task that ignores cancel is killed then
# How often a driver waiting on a task checks that the cluster still answers. Ray ends a driver
# whose cluster (its GCS) stays unreachable for 60 s (gcs_rpc_server_reconnect_timeout_s), so
# the run must notice well before, store what it has and disconnect.
WATCH_S = 5.0


def expected_locks(source: Source) -> dict[str, str]:
    """flavour → sha256 of the driver's lock of that flavour (what every node must build)."""
    if source.existing:
        return {}
    hashes = {flavour: lock_sha256(source.image_folder, flavour) for flavour in LOCKS}
    return {flavour: sha256 for flavour, sha256 in hashes.items() if sha256 is not None}


class RayExecutor(Executor):
    name = "ray"
    on_this_host = False        # Ray places every cell on a node of the cluster
    runs_existing = True        # an existing interpreter runs on each node (a VM image's stack)

    @classmethod
    def for_run(cls, flavour: Flavour, gpu: bool, address: str | None = None) -> RayExecutor:
        """The driver of the cluster at `address` (the host's own GPU does not matter)."""
        return cls(address, flavour=flavour)

    def __init__(self, address: str | None = None, retries: int | None = None,
                 flavour: Flavour | None = None):
        # Each node decides its own flavour, unless DL_BENCH_FLAVOUR forces one everywhere.
        forced = flavour is not None and flavour.reason.startswith(settings.FLAVOUR)
        self.flavour = flavour if flavour is not None and forced else NODE_FLAVOUR
        self.retries = retries if retries is not None else retries_setting()
        self.auth = authentication()        # before Ray is imported: it reads the mode then
        self.ray = import_ray()
        check_version(self.ray.__version__)
        self.address = address or os.environ.get(ADDRESS_ENV) or None
        self.node_executor = settings.get(settings.NODE_EXECUTOR)      # auto | local | docker
        self.facts: dict[str, Any] = {}     # the cluster's nodes, GPUs, CPUs, Ray version
        self._staged: tempfile.TemporaryDirectory | None = None
        self._task: Any = None
        self._in_flight: InFlight[Any] = InFlight()     # task generators
        self._sources: dict[str, Source] = {}            # what prepare() was given, by key
        self._lock = threading.Lock()
        self._connected_here = False
        self.lost: str | None = None      # why no further cell can run: the cluster is gone
        self._gcs: str | None = None      # the cluster's GCS address (HOST:PORT), once joined

    @property
    def where(self) -> str:
        place = f"the Ray cluster at {self.address}" if self.address else \
            "a local Ray instance (no --ray-address or RAY_ADDRESS)"
        return f"{place}, {self.auth}"

    # --- the driver ------------------------------------------------------------------------------

    def connect(self) -> dict[str, Any]:
        """Join the cluster (or start a local instance), ship the code; the cluster's figures."""
        ray = self.ray
        if self._task is None:
            if not ray.is_initialized():
                self._staged = tempfile.TemporaryDirectory(prefix="dl-bench-ray-code-")
                try:
                    join(ray, self.address, Path(self._staged.name),
                         settings.texts(FORWARDED_ENV))
                except RayUnavailable:
                    self._drop_stage()
                    raise
                self._connected_here = True
            self._task = ray.remote(run_on_node)
            self.facts = cluster_facts(ray)
            self._gcs = gcs_address(ray)
        return self.facts

    def cluster_problem(self) -> str | None:
        """Why the cluster no longer answers (its GCS refuses a connection), or None."""
        return address_problem(self._gcs) if self._gcs else None

    def next_reply(self, generator: Any) -> Any:
        """The task's next reply, checking every WATCH_S that the cluster still answers;
        ClusterLost when it does not."""
        ray = self.ray
        while not ray.wait([generator], timeout=WATCH_S)[0]:
            problem = self.cluster_problem()
            if problem:
                raise ClusterLost(problem)
        return ray.get(next(generator))

    def slots(self, parallel: int | str) -> tuple[int, str]:
        """Task slots the driver keeps in flight: one per GPU of the cluster (one per node on a
        cluster without GPUs), capped by [run] parallel; Ray places them."""
        facts = self.connect()
        slots = facts["gpus"] or len(facts["nodes"]) or 1
        count = slots if parallel == "auto" else max(1, min(int(parallel), slots))
        what = f"{facts['gpus']} GPUs" if facts["gpus"] else "no GPU: one cell per node"
        return count, f"{len(facts['nodes'])} Ray node(s), {what}"

    def cluster(self) -> dict[str, Any]:
        return self.connect()

    def placement_manifest(self) -> dict[str, Any]:
        return {"ray": {"address": self.address, **self.facts}}

    def would_use(self, source: Source) -> tuple[str | None, str]:
        if source.existing:
            return None, f"python {source.python} on each node"
        flavour = settings.get(settings.FLAVOUR)
        locks = "/".join(sorted({lock_path(source.image_folder, folder_flavour(
            Flavour(f, ""), source.image_folder)).name for f in ([flavour] if flavour else LOCKS)}))
        return flavour or NODE_FLAVOUR.name, f"images/{source.folder}/{locks}, built on each node"

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        """Every node that can run cells builds (or finds) the lock's environment now, all at
        once; a node that joins later builds it before its first cell. A node that cannot is
        named in a warning (its cells will fail, saying why); if none can, the environment
        fails."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        flavour, uses = self.would_use(source)
        locks = expected_locks(source)
        if not source.existing and not locks:
            return Prepared(source.key, uses, flavour,
                            error=f"images/{source.folder}: no requirements lock")
        self._sources[source.key] = source
        request = PrepareRequest(source, locks, self.node_executor)
        nodes = [n for n in self.connect()["nodes"] if n["cpus"]]
        task = self.ray.remote(prepare_on_node)
        pending = {task.options(num_cpus=0, name=f"dl-bench prepare {source.key}",
                                scheduling_strategy=NodeAffinitySchedulingStrategy(
                                    n["ray_node_id"], soft=False)).remote(request): n
                   for n in nodes}
        on_line(f"preparing on {len(nodes)} Ray node(s)")
        ready: list[str] = []
        failures: list[str] = []
        notes: list[str] = []
        while pending:
            done, _ = self.ray.wait(list(pending), num_returns=1, timeout=WATCH_S)
            if not done:
                problem = self.cluster_problem()
                if problem:
                    return Prepared(source.key, uses, flavour, error=f"the Ray cluster at "
                                    f"{self._gcs} stopped answering ({problem})")
                continue
            node = pending.pop(done[0])
            try:
                reply: PrepareReply = self.ray.get(done[0])
            except self.ray.exceptions.RayError as exc:
                reply = PrepareReply(f"{type(exc).__name__}: {first_line(exc)}")
            name = f"node {node['node_ip']} ({node['node_name']})"
            (failures if reply.error else ready).append(f"{name}: {reply.error}")
            notes += [f"{name}: {warning}" for warning in reply.warnings]
            on_line(f"{len(ready)}/{len(nodes)} nodes ready" +
                    (f", {len(failures)} failed" if failures else ""))
        metadata: dict[str, Any] = {"executor": self.name,
                                    "env_source": "existing" if source.existing else "lock"}
        forced = settings.get(settings.FLAVOUR)
        if forced and forced in locks:
            metadata["lock_sha256"] = locks[forced]
        if failures and not ready:
            return Prepared(source.key, uses, flavour, metadata=metadata,
                            error="no Ray node could prepare it: " + "; ".join(failures))
        return Prepared(source.key, uses, flavour, metadata=metadata, warnings=failures + notes)

    def resources(self, gpus: int) -> dict[str, Any]:
        """A GPU cell: its GPUs (one; a data-parallel cell's devices, which Ray gives a task on
        one node) and one CPU for its host threads. A CPU cell (gpus 0): every CPU of the
        smallest node, so that it runs alone on whichever node it lands."""
        if gpus and self.facts.get("gpus"):
            return {"num_gpus": gpus, "num_cpus": 1}
        return {"num_gpus": 0, "num_cpus": self.facts.get("cpus_per_node") or 1}

    def request_for(self, prepared: Prepared, attempt: Attempt, source: Source) -> CellRequest:
        return CellRequest(spec=attempt.spec, source=source, locks=expected_locks(source),
                           env=attempt.env, timeout=attempt.timeout,
                           wants_gpu=attempt.gpu is not None, node_executor=self.node_executor,
                           staged_code=staged_sources(attempt))

    def submit(self, request: CellRequest, attempt: Attempt) -> Any:
        return self._task.options(
            **self.resources(attempt.gpu.count if attempt.gpu is not None else 0),
            max_retries=0,                                               # resubmitted in run()
            name=f"dl-bench cell {attempt.spec.cell_name} r{attempt.spec.repeat}").remote(request)

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        started = time.monotonic()
        request = self.request_for(prepared, attempt, self._sources[prepared.key])
        losses: list[str] = []
        for tries in range(1, self.retries + 2):
            attempt.on_status("waiting for a Ray node" + (f" (try {tries})" if tries > 1 else ""))
            problem = self.cluster_problem()
            if problem:
                return self.cluster_lost(attempt, started, problem, {})
            outcome = self.submit_once(request, attempt, started, tries, losses)
            if outcome is not None:
                return outcome
        return self.crashed(attempt, started, f"the Ray task was lost {len(losses)} times "
                            f"({self.retries} retries): " + "; ".join(losses))

    def submit_once(self, request: CellRequest, attempt: Attempt, started: float, tries: int,
                    losses: list[str]) -> Outcome | None:
        """One submission of the cell's task: its outcome, or None when the task was lost and
        may be submitted again (the loss added to `losses`)."""
        ray = self.ray
        placement: dict[str, Any] = {}
        generator = self.submit(request, attempt)
        try:
            with self._in_flight.holding(generator):
                placed: Placed = self.next_reply(generator)
                placement.update(placed.placement)
                attempt.placement.update(placement)
                attempt.on_status(f"on {where(placement)}")
                reply: CellReply = self.next_reply(generator)
        except ClusterLost as exc:
            return self.cluster_lost(attempt, started, str(exc), placement)
        except ray.exceptions.TaskCancelledError:
            raise KeyboardInterrupt from None
        except ray.exceptions.RayTaskError as exc:   # the node's code raised: no retry
            return self.crashed(attempt, started, f"the Ray task on {where(placement)} "
                                f"failed: {exc}")
        except KeyboardInterrupt:
            self.cancel(generator)
            raise
        except ray.exceptions.RayError as exc:       # process, node or object lost: retry
            problem = self.cluster_problem()
            if problem:                              # ... unless the whole cluster is
                return self.cluster_lost(attempt, started, problem, placement)
            loss = f"try {tries} on {where(placement)}: {type(exc).__name__}: {first_line(exc)}"
            losses.append(loss)
            note_in_log(attempt.log_path, f"ray task lost, {loss}")
            return None
        return self.received(reply, attempt, started)

    def received(self, reply: CellReply, attempt: Attempt, started: float) -> Outcome:
        """Store what the node sent where a local worker would have left it."""
        if reply.error or reply.outcome is None:
            return self.crashed(attempt, started, reply.error or "the node sent no outcome",
                                reply.log)
        append_to_log(attempt.log_path, reply.log)
        if reply.result is not None:
            write_text_atomic(attempt.result_path, reply.result)
        attempt.placement.update({**reply.metadata, "executor": self.name})
        outcome = dataclasses.replace(reply.outcome, log_tail=log_tail(attempt.log_path))
        return outcome

    def crashed(self, attempt: Attempt, started: float, error: str, log: str = "") -> Outcome:
        """The task could not report a worker's result: the executor writes it (crashed)."""
        append_to_log(attempt.log_path, log)
        note_in_log(attempt.log_path, error)
        write_crashed_result(attempt, error)
        attempt.placement.setdefault("executor", self.name)
        return Outcome(returncode=None, timed_out=False, wall_s=time.monotonic() - started,
                       log_tail=log_tail(attempt.log_path))

    def cluster_lost(self, attempt: Attempt, started: float, problem: str,
                     placement: dict[str, Any]) -> Outcome:
        """The cluster stopped answering: the cell is recorded as crashed and this executor
        marked lost, so the run stops after it (Ray would end the driver within a minute)."""
        where_ = f" while the cell ran on {where(placement)}" if placement else ""
        with self._lock:
            if self.lost is None:
                self.lost = f"the Ray cluster at {self._gcs} is gone ({problem})"
        return self.crashed(attempt, started, f"the Ray cluster at {self._gcs} stopped "
                            f"answering ({problem}){where_}")

    def cancel(self, generator: Any) -> None:
        """Stop a task: its node kills the worker (or container) and cleans up; a task that
        does not stop within the grace period is killed with its process."""
        ray = self.ray
        try:
            ray.cancel(generator)
            ready, _ = ray.wait([generator.completed()], timeout=CANCEL_GRACE_S)
            if not ready:
                ray.cancel(generator, force=True)
        except Exception:  # already finished, or the cluster is gone: nothing left to stop
            pass

    def interrupt(self) -> None:
        if self.lost:       # nothing to cancel on a cluster that is gone
            return
        for generator in self._in_flight.snapshot():
            try:
                self.ray.cancel(generator)
            except Exception:
                pass

    def close(self) -> None:
        if self._connected_here and self.ray.is_initialized():
            self.ray.shutdown()
        self._connected_here = False
        self._task = None
        self._drop_stage()

    def _drop_stage(self) -> None:
        if self._staged is not None:
            self._staged.cleanup()
            self._staged = None
