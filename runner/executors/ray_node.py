"""What runs inside a Ray task, on the node it landed on: the node's own executor (the "auto"
rule of executors/auto.py, or DL_BENCH_NODE_EXECUTOR), the environment built there after its
lock is checked against the driver's, the cell run on the GPU Ray gave the task, and its result,
log and facts sent back.

Executors and prepared environments are kept per Ray worker process (Ray reuses workers across
tasks); a file lock per environment keeps two tasks of one node from building the same
environment at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..environments import Source, decide_flavour, folder_flavour, lock_path, lock_sha256
from ..environments.venvs import ENV_ROOT
from ..worker.protocol import CellSpec
from .base import Attempt, Executor, GpuRequest, Outcome, Prepared, write_spec
from .ray_messages import CellReply, CellRequest, Placed, PrepareReply, PrepareRequest

LOG_LIMIT = 4 * 2**20                       # bytes of a cell's log sent back to the driver
RESULT_LIMIT = 64 << 20                     # a result.json larger than this is not one

_NODE_STATE: dict[Any, Any] = {}
_NODE_STATE_LOCK = threading.Lock()


def where(placement: dict[str, Any]) -> str:
    """node 10.0.0.7 (gpu-vm-3) GPU 2"""
    if not placement:
        return "an unknown node (lost before it started)"
    text = f"node {placement.get('node_ip')} ({placement.get('node_name')})"
    if "gpu_index" in placement:
        text += f" GPU {placement['gpu_index']}"
    return text


def run_on_node(request: CellRequest) -> Iterator[Placed | CellReply]:
    """The Ray task: first where it runs (so a lost task can still be placed), then the result."""
    placement = node_placement()
    yield Placed(placement)
    try:
        yield run_here(request, placement)
    except Exception as exc:  # a bug on the node becomes the cell's error text
        import traceback

        yield CellReply(error=f"on {where(placement)}: {type(exc).__name__}: {exc}",
                        log=traceback.format_exc())


def node_placement() -> dict[str, Any]:
    import ray

    from ..machine import hostinfo

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
    if len(ids) > 1:                             # a data-parallel cell: every GPU it was given
        placement["gpu_indices"] = [int(i) if i.isdigit() else i for i in ids]
    return placement


def prepare_on_node(request: PrepareRequest) -> PrepareReply:
    """The Ray task that builds (or finds) one environment on the node it is pinned to."""
    try:
        _, executor = node_executor(request.node_executor)
        prepared = prepare_here(executor, request.source, request.locks)
    except Exception as exc:  # reported per node by the driver
        return PrepareReply(f"{type(exc).__name__}: {exc}")
    return PrepareReply(prepared.error, list(prepared.warnings))


def run_here(request: CellRequest, placement: dict[str, Any]) -> CellReply:
    kind, executor = node_executor(request.node_executor)
    prepared = prepare_here(executor, request.source, request.locks)
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
        return CellReply(outcome, result, read_log(log_path),
                         {**prepared.metadata, **placement, "node_executor": kind})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def node_attempt(request: CellRequest, placement: dict[str, Any], work: Path,
                 log_path: Path) -> Attempt:
    """The driver's attempt on this node: its spec, in a work folder here, on the GPU Ray gave
    the task."""
    gpu = None
    if request.wants_gpu:
        device_id = placement.get("gpu_uuid") or (str(placement["gpu_index"])
                                                  if "gpu_index" in placement else None)
        gpu = GpuRequest(device_id)
        every = [str(i) for i in placement.get("gpu_indices", [])]
        if every:                                # a data-parallel cell: all of them, as Ray names them
            gpu = GpuRequest(every[0], tuple(every[1:]), count=len(every))
    spec = request.spec
    return Attempt(spec=spec, work_dir=work, log_path=log_path, env=request.env,
                   timeout=request.timeout, gpu=gpu,
                   staged_code=stage_here(request.staged_code, spec, work))


def staged_sources(attempt: Attempt) -> dict[str, bytes] | None:
    """A user workload's staged code, shipped with its cell (name → bytes); the node stages it
    read-only again (ray_node.node_attempt)."""
    entry = attempt.spec.user_workload
    if attempt.staged_code is None or not entry:
        return None
    folder = attempt.staged_code / entry["folder"]
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix == ".py"}


def stage_here(sources: dict[str, bytes] | None, spec: CellSpec, work: Path) -> Path | None:
    """A user workload's code, shipped with the cell, staged read-only in the cell's folder."""
    if not sources or not spec.user_workload:
        return None
    root = work / "workloads"
    folder = root / spec.user_workload["folder"]
    folder.mkdir(parents=True)
    for name, data in sources.items():
        target = folder / Path(name).name          # a name, never a path
        target.write_bytes(data)
        target.chmod(0o444)
    return root


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


def run_interruptibly(executor: Executor, prepared: Prepared, attempt: Attempt) -> Outcome:
    """Run the cell in a helper thread: Ray's cancel arrives as KeyboardInterrupt in this (the
    task's) thread only between Python instructions, never inside a blocking wait; then the
    executor kills the worker or container and cleans up before the task ends."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["outcome"] = executor.run(prepared, attempt)
        except BaseException as exc:  # handed to the task's thread
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
            from ..machine import hostinfo
            from . import kinds
            from .auto import choose

            gpu = hostinfo.gpu_found()
            facts = hostinfo.gpu_facts()
            flavour = decide_flavour(facts.get("gpu_count") or 0, facts.get("gpu_name"))
            kind = choose(gpu)[0] if wanted == kinds.AUTO else wanted
            _NODE_STATE[key] = (kind, kinds.create(kind, flavour, gpu))
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


def prepare_here(executor: Executor, source: Source, locks: dict[str, str]) -> Prepared:
    """The environment on this node, built from the lock when missing, after checking that this
    node's lock is the driver's; and that what was built holds that lock."""
    flavour = folder_flavour(executor.flavour, source.image_folder) if not source.existing else None
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
                                f"{source.folder} environment built here holds lock sha256 "
                                f"{str(built)[:12]}, the driver's lock is {want[:12]}")
    if not prepared.error:
        with _NODE_STATE_LOCK:
            _NODE_STATE[key] = prepared
    return prepared


def lock_mismatch(source: Source, flavour: str | None, want: str | None) -> str | None:
    """Why this node cannot build the driver's environment, or None."""
    if source.existing or flavour is None:      # an existing interpreter: no lock
        return None
    lock = lock_path(source.image_folder, flavour)
    here = f"node {socket.gethostname()}"
    if want is None:
        return f"{here} needs images/{source.folder}/{lock.name}, which the driver does not have"
    have = lock_sha256(source.image_folder, flavour)
    if have is None:
        return f"{here}: images/{source.folder}/{lock.name} is missing"
    if have != want:
        return (f"{here}: images/{source.folder}/{lock.name} has sha256 {have[:12]}, the "
                f"driver's has {want[:12]}: the node would not run the lock's environment")
    return None
