"""The Ray executor: each cell × repeat is one Ray task, on a cluster of GPU machines.

Ray only schedules. A task asks for one GPU (a CPU cell, or any cell on a cluster without GPUs,
asks for all CPUs of a node, so it runs alone there) and, on the node it lands on, runs the
existing local or docker executor: the node builds exactly the lock's environment or image
itself (cached as on any host), checks its lock hash against the driver's, and runs the worker
pinned to the GPU Ray gave the task. Ray is never installed inside the framework environments.

No shared file system: the runner's code and the image folders travel with the job (Ray's
`working_dir`, staged from this checkout), the spec goes out in the task's arguments, and the
worker's result, its log and the node's facts come back as the task's return values; the driver
stores them exactly as a local run does. A task whose process or node is lost is submitted
again, at most DL_BENCH_RAY_RETRIES times (Ray places it on a node that is alive), then the cell
is recorded as crashed with each loss named.

`ray` is imported lazily: the runner works without it until this executor is asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from ..environments import FLAVOUR_ENV, LOCKS, Flavour, Source, decide_flavour, image_flavour, \
    lock_path
from ..environments.venvs import ENV_ROOT, sha256_file
from ..matrix import IMAGES_DIR, REPO_ROOT
from ..worker.protocol import CellSpec, write_text_atomic
from .base import (Attempt, Executor, ExecutorUnavailable, GpuRequest, InFlight, Outcome,
                   Prepared, log_tail, note_in_log, write_crashed_result, write_spec)
from .local import INHERIT_ENV, LOG_HEAD_ENV, LOG_TAIL_ENV

ADDRESS_ENV = "RAY_ADDRESS"
RETRIES_ENV = "DL_BENCH_RAY_RETRIES"       # resubmissions of a lost task (default 2)
NODE_EXECUTOR_ENV = "DL_BENCH_NODE_EXECUTOR"   # auto | local | docker, on every node
DEFAULT_RETRIES = 2
# The driver's settings every node must share (the base image its Docker builds start from, a
# forced flavour, a container memory limit, the node executor, what workers inherit, log caps).
FORWARDED_ENV = ("DL_BENCH_BASE_IMAGE", "DL_BENCH_DOCKER_MEMORY", FLAVOUR_ENV, NODE_EXECUTOR_ENV,
                 INHERIT_ENV, LOG_HEAD_ENV, LOG_TAIL_ENV)
NODE_FLAVOUR = Flavour("node", "each Ray node: cuda where it has an NVIDIA GPU, else cpu")
LOG_LIMIT = 4 * 2**20                       # bytes of a cell's log sent back to the driver
RESULT_LIMIT = 64 << 20                     # a result.json larger than this is not one
MIN_RAY = (2, 52)                           # token authentication
AUTH_MODE_ENV = "RAY_AUTH_MODE"
CANCEL_GRACE_S = 30.0                       # Ctrl-C: a task that ignores cancel is killed then
# How often a driver waiting on a task checks that the cluster still answers. Ray ends a driver
# whose cluster (its GCS) stays unreachable for 60 s (gcs_rpc_server_reconnect_timeout_s), so
# the run must notice well before, store what it has and disconnect.
WATCH_S = 5.0


class RayUnavailable(ExecutorUnavailable):
    """Ray is not installed or no cluster answers; the message is one line for the user."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("executor 'ray' needs Ray on this machine: pip install -e '.[ray]' "
                             "(see the README's cluster section)") from None
    return ray


def retries_setting() -> int:
    text = os.environ.get(RETRIES_ENV, str(DEFAULT_RETRIES)).strip()
    if not text.isdigit() or int(text) > 100:
        raise RayUnavailable(f"{RETRIES_ENV}={text!r}: expected a whole number from 0 to 100 "
                             "(resubmissions of a lost task)")
    return int(text)


def check_version(version: str) -> None:
    """Token authentication (RAY_AUTH_MODE=token) came with Ray 2.52."""
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < MIN_RAY:
        raise RayUnavailable(f"Ray {version} is older than {'.'.join(map(str, MIN_RAY))}, the "
                             "first with token authentication: pip install -e '.[ray]'")


def authentication() -> str:
    """Token authentication on the driver, and on the local instance it starts (Ray makes and
    keeps its token in ~/.ray/auth_token): RAY_AUTH_MODE=token unless the user set the mode.
    What the run's first lines say about it."""
    mode = os.environ.setdefault(AUTH_MODE_ENV, "token")
    if mode == "token":
        return f"{AUTH_MODE_ENV}=token"
    return f"{AUTH_MODE_ENV}={mode}: no token authentication (anyone who reaches the cluster " \
           "can run code on it)"


def address_problem(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at a cluster address (HOST:PORT or ray://HOST:PORT), tried with a
    plain TCP connection first: ray.init would retry an unreachable address for minutes."""
    target = address.split("://", 1)[-1].rstrip("/")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return None                      # "auto" and the like: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    return None


def stage_code(folder: Path) -> Path:
    """What every node needs of this checkout, copied into `folder`: the runner package (host
    and worker code) and the image folders (locks, Dockerfiles). Shipped as the job's
    working_dir, so a node runs exactly the driver's code and locks."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "runner", folder / "runner", ignore=ignore)
    shutil.copytree(IMAGES_DIR, folder / "images", ignore=ignore)
    return folder


def expected_locks(source: Source) -> dict[str, str]:
    """flavour → sha256 of the driver's lock of that flavour (what every node must build)."""
    if source.existing:
        return {}
    return {flavour: sha256_file(lock_path(source.image, flavour))
            for flavour in LOCKS if lock_path(source.image, flavour).is_file()}


class RayExecutor(Executor):
    name = "ray"
    on_this_host = False        # Ray places every cell on a node of the cluster
    runs_existing = True        # an existing interpreter runs on each node (a VM image's stack)

    def __init__(self, address: str | None = None, retries: int | None = None,
                 flavour: Flavour | None = None):
        # Each node decides its own flavour, unless DL_BENCH_FLAVOUR forces one everywhere.
        forced = flavour is not None and flavour.reason.startswith(FLAVOUR_ENV)
        self.flavour = flavour if forced else NODE_FLAVOUR
        self.retries = retries if retries is not None else retries_setting()
        self.auth = authentication()        # before Ray is imported: it reads the mode then
        self.ray = import_ray()
        check_version(self.ray.__version__)
        self.address = address or os.environ.get(ADDRESS_ENV) or None
        self.node_executor = os.environ.get(NODE_EXECUTOR_ENV, "auto")
        if self.node_executor not in ("auto", "local", "docker"):
            raise RayUnavailable(f"{NODE_EXECUTOR_ENV}={self.node_executor!r}: expected auto, "
                                 "local or docker")
        self.facts: dict[str, Any] = {}     # the cluster's nodes, GPUs, CPUs, Ray version
        self._staged: tempfile.TemporaryDirectory | None = None
        self._task: Any = None
        self._in_flight: InFlight[Any] = InFlight()     # task generators
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
                problem = address_problem(self.address) if self.address else None
                if problem:
                    raise RayUnavailable(f"no Ray cluster answers at {self.address} ({problem}); "
                                         "start one (ray up, or ray start --head) or fix "
                                         "--ray-address / RAY_ADDRESS")
                self._staged = tempfile.TemporaryDirectory(prefix="dl-bench-ray-code-")
                runtime_env = {"working_dir": str(stage_code(Path(self._staged.name))),
                               "env_vars": {k: os.environ[k] for k in FORWARDED_ENV
                                            if k in os.environ}}
                try:
                    with our_sigterm_handler():
                        ray.init(address=self.address or "local", runtime_env=runtime_env,
                                 log_to_driver=False, logging_level=logging.WARNING,
                                 **({} if self.address else {"include_dashboard": False}))
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    self._drop_stage()
                    what = f"no Ray cluster answers at {self.address}" if self.address else \
                        "a local Ray instance could not start"
                    hint = " (with token authentication the driver needs the cluster's token: " \
                        "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)" \
                        if self.address and os.environ.get(AUTH_MODE_ENV) == "token" else ""
                    raise RayUnavailable(f"{what}: {first_line(exc)}{hint}") from None
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
        flavour = os.environ.get(FLAVOUR_ENV) or None
        locks = "/".join(sorted({lock_path(source.image, image_flavour(
            Flavour(f, ""), source.image)).name for f in ([flavour] if flavour else LOCKS)}))
        return flavour or NODE_FLAVOUR.name, f"images/{source.image}/{locks}, built on each node"

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
                            error=f"images/{source.image}: no requirements lock")
        request = {"source": {"image": source.image, "python": source.python}, "locks": locks,
                   "node_executor": self.node_executor}
        nodes = [n for n in self.connect()["nodes"] if n["cpus"]]
        task = self.ray.remote(prepare_on_node)
        pending = {task.options(num_cpus=0, name=f"dl-bench prepare {source.key}",
                                scheduling_strategy=NodeAffinitySchedulingStrategy(
                                    n["ray_node_id"], soft=False)).remote(request): n
                   for n in nodes}
        on_line(f"preparing on {len(nodes)} Ray node(s)")
        ready, failures, notes = [], [], []
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
                reply = self.ray.get(done[0])
            except self.ray.exceptions.RayError as exc:
                reply = {"error": f"{type(exc).__name__}: {first_line(exc)}"}
            name = f"node {node['node_ip']} ({node['node_name']})"
            (failures if reply.get("error") else ready).append(f"{name}: {reply.get('error')}")
            notes += [f"{name}: {warning}" for warning in reply.get("warnings") or []]
            on_line(f"{len(ready)}/{len(nodes)} nodes ready" +
                    (f", {len(failures)} failed" if failures else ""))
        metadata: dict[str, Any] = {"executor": self.name,
                                    "env_source": "existing" if source.existing else "lock"}
        forced = os.environ.get(FLAVOUR_ENV)
        if forced and forced in locks:
            metadata["lock_sha256"] = locks[forced]
        if failures and not ready:
            return Prepared(source.key, uses, flavour, metadata=metadata,
                            error="no Ray node could prepare it: " + "; ".join(failures))
        return Prepared(source.key, uses, flavour, metadata=metadata, warnings=failures + notes)

    def resources(self, wants_gpu: bool) -> dict[str, Any]:
        """A GPU cell: one GPU (and one CPU for its host threads). A CPU cell: every CPU of the
        smallest node, so that it runs alone on whichever node it lands."""
        if wants_gpu and self.facts.get("gpus"):
            return {"num_gpus": 1, "num_cpus": 1}
        return {"num_gpus": 0, "num_cpus": self.facts.get("cpus_per_node") or 1}

    def request_for(self, prepared: Prepared, attempt: Attempt, source: Source) -> dict[str, Any]:
        return {"spec": attempt.spec.to_dict(),
                "source": {"image": source.image, "python": source.python},
                "locks": expected_locks(source), "env": attempt.env, "timeout": attempt.timeout,
                "wants_gpu": attempt.gpu is not None, "node_executor": self.node_executor}

    def submit(self, request: dict[str, Any], attempt: Attempt) -> Any:
        return self._task.options(
            **self.resources(attempt.gpu is not None), max_retries=0,   # resubmitted in run()
            name=f"dl-bench cell {attempt.spec.cell_name} r{attempt.spec.repeat}").remote(request)

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        started = time.monotonic()
        request = self.request_for(prepared, attempt, source_from_key(prepared.key))
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

    def submit_once(self, request: dict[str, Any], attempt: Attempt, started: float, tries: int,
                    losses: list[str]) -> Outcome | None:
        """One submission of the cell's task: its outcome, or None when the task was lost and
        may be submitted again (the loss added to `losses`)."""
        ray = self.ray
        placement: dict[str, Any] = {}
        generator = self.submit(request, attempt)
        try:
            with self._in_flight.holding(generator):
                placement.update(self.next_reply(generator)["placement"])
                attempt.placement.update(placement)
                attempt.on_status(f"on {where(placement)}")
                reply = self.next_reply(generator)
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

    def received(self, reply: dict[str, Any], attempt: Attempt, started: float) -> Outcome:
        """Store what the node sent where a local worker would have left it."""
        if reply.get("error"):
            return self.crashed(attempt, started, reply["error"], reply.get("log", ""))
        with attempt.log_path.open("a", encoding="utf-8") as log:
            log.write(reply.get("log", ""))
        if reply.get("result") is not None:
            write_text_atomic(attempt.result_path, reply["result"])
        attempt.placement.update({**reply.get("metadata", {}), "executor": self.name})
        outcome = Outcome(**reply["outcome"])
        outcome.log_tail = log_tail(attempt.log_path)
        return outcome

    def crashed(self, attempt: Attempt, started: float, error: str, log: str = "") -> Outcome:
        """The task could not report a worker's result: the executor writes it (crashed)."""
        with attempt.log_path.open("a", encoding="utf-8") as handle:
            handle.write(log)
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


class ClusterLost(Exception):
    """The cluster's GCS no longer accepts connections."""


def gcs_address(ray: Any) -> str | None:
    """HOST:PORT of the cluster's GCS, which the driver probes to tell a lost task from a lost
    cluster."""
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:  # an older Ray: no probe, Ray's own errors decide
        return None


@contextlib.contextmanager
def our_sigterm_handler() -> Iterator[None]:
    """ray.init replaces the driver's SIGTERM handler with sys.exit: keep the runner's, which
    stops the run as Ctrl-C does (cells cancelled, records kept, the manifest finalised)."""
    main = threading.current_thread() is threading.main_thread()
    ours = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and ours is not None:
            signal.signal(signal.SIGTERM, ours)


def source_from_key(key: str) -> Source:
    return Source(python=key[len("python:"):]) if key.startswith("python:") else Source(image=key)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def where(placement: dict[str, Any]) -> str:
    """node 10.0.0.7 (gpu-vm-3) GPU 2"""
    if not placement:
        return "an unknown node (lost before it started)"
    text = f"node {placement.get('node_ip')} ({placement.get('node_name')})"
    if "gpu_index" in placement:
        text += f" GPU {placement['gpu_index']}"
    return text


def cluster_facts(ray: Any) -> dict[str, Any]:
    nodes = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        nodes.append({"node_ip": node.get("NodeManagerAddress"),
                      "node_name": node.get("NodeManagerHostname"),
                      "ray_node_id": node.get("NodeID"),
                      "cpus": int(resources.get("CPU", 0)), "gpus": int(resources.get("GPU", 0))})
    cpus = [n["cpus"] for n in nodes if n["cpus"]]
    return {"nodes": nodes, "gpus": sum(n["gpus"] for n in nodes),
            "cpus": sum(n["cpus"] for n in nodes), "cpus_per_node": min(cpus) if cpus else 1,
            "ray_version": ray.__version__}


# --- the node --------------------------------------------------------------------------------------
# What runs inside a Ray task on the node it landed on. Executors and prepared environments are
# kept per Ray worker process (Ray reuses workers across tasks); a file lock per environment keeps
# two tasks of one node from building the same environment at once.

_NODE_STATE: dict[Any, Any] = {}
_NODE_STATE_LOCK = threading.Lock()


def run_on_node(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The Ray task: first where it runs (so a lost task can still be placed), then the result."""
    placement = node_placement()
    yield {"placement": placement}
    try:
        yield run_here(request, placement)
    except Exception as exc:  # noqa: BLE001 - a bug on the node becomes the cell's error text
        import traceback

        yield {"error": f"on {where(placement)}: {type(exc).__name__}: {exc}",
               "log": traceback.format_exc()}


def node_placement() -> dict[str, Any]:
    import ray

    from .. import hostinfo

    placement: dict[str, Any] = {"node_name": socket.gethostname(),
                                 "node_ip": ray.util.get_node_ip_address(),
                                 "ray_node_id": ray.get_runtime_context().get_node_id()}
    ids = [str(i) for i in ray.get_gpu_ids()]
    if ids:
        known = hostinfo.gpus()
        match = [g for g in known if ids[0] in (str(g.index), g.uuid)]
        if match:
            placement["gpu_index"] = match[0].index
            if match[0].uuid:
                placement["gpu_uuid"] = match[0].uuid
        elif ids[0].isdigit():                   # a GPU Ray knows of but NVML does not list
            placement["gpu_index"] = int(ids[0])
    return placement


def prepare_on_node(request: dict[str, Any]) -> dict[str, Any]:
    """The Ray task that builds (or finds) one environment on the node it is pinned to."""
    try:
        _, executor = node_executor(request["node_executor"])
        prepared = prepare_here(executor, Source(**request["source"]), request["locks"])
    except Exception as exc:  # noqa: BLE001 - reported per node by the driver
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"error": prepared.error, "warnings": prepared.warnings}


def run_here(request: dict[str, Any], placement: dict[str, Any]) -> dict[str, Any]:
    source = Source(**request["source"])
    kind, executor = node_executor(request["node_executor"])
    prepared = prepare_here(executor, source, request["locks"])
    # A fresh private folder (mkdtemp: an unpredictable name, mode 0700), never a fixed /tmp
    # path another user could have planted a link at.
    work = Path(tempfile.mkdtemp(prefix="dl-bench-ray-cell-"))
    try:
        log_path = work / "worker.log"
        log_path.touch()
        if prepared.error:
            outcome = Outcome(returncode=None, timed_out=False, wall_s=0.0)
            result: str | None = json.dumps({"schema": 1, "status": "failed",
                                             "error": prepared.error})
        else:
            attempt = node_attempt(request, placement, work, log_path)
            write_spec(attempt)
            outcome = run_interruptibly(executor, prepared, attempt)
            result = read_result(attempt.result_path)
        return {"outcome": dataclasses.asdict(outcome), "result": result,
                "log": read_log(log_path),
                "metadata": {**prepared.metadata, **placement, "node_executor": kind}}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def node_attempt(request: dict[str, Any], placement: dict[str, Any], work: Path,
                 log_path: Path) -> Attempt:
    """The driver's attempt on this node: its spec, in a work folder here, on the GPU Ray gave
    the task."""
    gpu = None
    if request["wants_gpu"]:
        device_id = placement.get("gpu_uuid") or (str(placement["gpu_index"])
                                                  if "gpu_index" in placement else None)
        gpu = GpuRequest(device_id)
    return Attempt(spec=CellSpec.from_dict(request["spec"]), work_dir=work, log_path=log_path,
                   env=request["env"], timeout=request["timeout"], gpu=gpu)


def read_result(path: Path) -> str | None:
    """The worker's result.json as it wrote it, for the driver to store and check; None when
    there is none (never through a link, never more than RESULT_LIMIT bytes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(RESULT_LIMIT + 1)
        return data.decode("utf-8") if len(data) <= RESULT_LIMIT else None
    except (OSError, UnicodeDecodeError):
        return None


def run_interruptibly(executor: Any, prepared: Prepared, attempt: Attempt) -> Outcome:
    """Run the cell in a helper thread: Ray's cancel arrives as KeyboardInterrupt in this (the
    task's) thread only between Python instructions, never inside a blocking wait; then the
    executor kills the worker or container and cleans up before the task ends."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["outcome"] = executor.run(prepared, attempt)
        except BaseException as exc:  # noqa: BLE001 - handed to the task's thread
            done["error"] = exc

    thread = threading.Thread(target=target, name="cell", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except BaseException:
        executor.interrupt()
        thread.join(60)
        raise
    if "error" in done:
        raise done["error"]
    return done["outcome"]


def read_log(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_LIMIT))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return (f"[runner: the first {size - LOG_LIMIT} bytes of the log were left on the node]\n"
            if size > LOG_LIMIT else "") + text


def node_executor(wanted: str) -> tuple[str, Any]:
    """(kind, executor) of this node: docker when asked for, or (auto) when the node has a GPU
    and a Docker engine answers; local otherwise. Made once per Ray worker process."""
    with _NODE_STATE_LOCK:
        key = ("executor", wanted)
        if key not in _NODE_STATE:
            from .. import hostinfo
            from .auto import choose
            from .docker import DockerExecutor
            from .local import LocalExecutor

            gpu = hostinfo.gpu_found()
            facts = hostinfo.gpu_facts()
            flavour = decide_flavour(facts.get("gpu_count") or 0, facts.get("gpu_name"))
            kind = choose(gpu)[0] if wanted == "auto" else wanted
            executor = DockerExecutor(flavour, gpu) if kind == "docker" else \
                LocalExecutor(flavour, gpu)
            _NODE_STATE[key] = (kind, executor)
        return _NODE_STATE[key]


def node_lock_folder() -> Path:
    """Where the node's build locks live: beside the user's environment cache (its own home),
    not in a shared /tmp folder of a predictable name."""
    folder = ENV_ROOT.parent / "locks"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def node_file_lock(name: str) -> Iterator[None]:
    """One holder per node (across Ray worker processes) at a time."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    fd = os.open(node_lock_folder() / f"{digest}.lock",
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def prepare_here(executor: Any, source: Source, locks: dict[str, str]) -> Prepared:
    """The environment on this node, built from the lock when missing, after checking that this
    node's lock is the driver's; and that what was built holds that lock."""
    flavour = image_flavour(executor.flavour, source.image) if not source.existing else None
    want = locks.get(flavour) if flavour else None
    key = ("prepared", executor.name, source.key, flavour, want)
    with _NODE_STATE_LOCK:
        if key in _NODE_STATE:
            return _NODE_STATE[key]
    mismatch = lock_mismatch(source, flavour, want)
    if mismatch:
        return Prepared(source.key, error=mismatch)
    with node_file_lock(f"{executor.name}:{source.key}:{flavour}"):
        prepared = executor.prepare(source, lambda line: None)
    if not prepared.error and want is not None:
        built = executor.built_lock_sha256(prepared)
        if built != want:
            prepared = Prepared(source.key, error=f"node {socket.gethostname()}: the "
                                f"{source.image} environment built here holds lock sha256 "
                                f"{str(built)[:12]}, the driver's lock is {want[:12]}")
    if not prepared.error:
        with _NODE_STATE_LOCK:
            _NODE_STATE[key] = prepared
    return prepared


def lock_mismatch(source: Source, flavour: str | None, want: str | None) -> str | None:
    """Why this node cannot build the driver's environment, or None."""
    if source.existing:
        return None
    lock = lock_path(source.image, flavour)
    here = f"node {socket.gethostname()}"
    if want is None:
        return f"{here} needs images/{source.image}/{lock.name}, which the driver does not have"
    if not lock.is_file():
        return f"{here}: images/{source.image}/{lock.name} is missing"
    have = sha256_file(lock)
    if have != want:
        return (f"{here}: images/{source.image}/{lock.name} has sha256 {have[:12]}, the "
                f"driver's has {want[:12]}: the node would not run the lock's environment")
    return None
