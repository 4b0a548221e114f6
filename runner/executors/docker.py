"""The GPU path: one pinned image per environment, one fresh container per cell × repeat.

Each container gets the repository's `runner` package read-only, the cell's work folder (spec.json
in, result.json out) as its only writable mount, a read-only root filesystem with a tmpfs /tmp, no
network, no capabilities, no new privileges, a non-root user, a cap on its processes, NVIDIA's
recommended shm size and ulimits, and one GPU through a device request when the cell runs on the
GPU. Its output goes to the cell's log, capped as a local worker's is. Timeouts kill the container;
the kernel's OOM kill is read back from the engine. Containers carry the runner's labels and are
removed afterwards (also on Ctrl-C and SIGTERM); leftovers of a killed run are removed when the
next executor connects.

The docker SDK is imported lazily: planning and `--dry-run` never need it.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..environments import Flavour, Source, image_flavour, images
from ..matrix import REPO_ROOT
from ..worker.protocol import COMPILE_CACHE_ENV
from ..environments.docker_engine import (SLOW_LIMIT, TIMEOUT_ENV, DockerUnavailable,
                                          EngineProblem, EngineSettings, EngineSlow, call,
                                          classify, connect, reason)
from .base import (Attempt, ImageExecutor, InFlight, Outcome, Prepared, given_gpu, gpu_hand_off,
                   log_tail, note_in_log, write_crashed_result)
from .local import RUNNER_OWNED_ENV, log_caps
from .supervisor import CappedLog

CODE_ROOT = "/opt/dl-bench"                 # PYTHONPATH inside; the package is CODE_ROOT/runner
CELL_DIR = "/cell"                          # the cell's work folder inside
CONTAINER_USER = "1000:1000"                # the images' `bench` user
SHM_SIZE = "8g"                             # NVIDIA's containers suggest a large /dev/shm
STACK_BYTES = 67108864                      # NVIDIA: --ulimit memlock=-1 --ulimit stack=67108864
GPU_CAPABILITIES = [["gpu", "compute", "utility"]]
LABEL_RUNNER = f"{images.LABEL}.runner"    # every container of the runner
LABEL_OWNER = f"{images.LABEL}.owner"      # host:pid of the runner process that started it
LABEL_RUN = f"{images.LABEL}.run-id"
LABEL_CELL = f"{images.LABEL}.cell"
GPU_ENV = "DL_BENCH_GPU"                    # which GPU cells get (index or UUID), default 0
MEMORY_ENV = "DL_BENCH_DOCKER_MEMORY"       # optional memory limit per container, e.g. 64g
HOST_GPU_FILE = "host_gpu.json"             # host-side NVML summary, beside result.json
# Processes and threads a container may hold: far above what a framework starts (TensorFlow
# and XLA thread pools, torch.compile's workers: hundreds on a large VM), far below a fork bomb.
PIDS_LIMIT = 8192
# The root filesystem is read-only; frameworks write only under /tmp (HOME=/tmp: Keras's
# config, compile caches, torch.compile's kernels, which are loaded from there, hence exec).
TMPFS = {"/tmp": "rw,exec,nosuid,nodev,mode=1777"}


def container_user() -> str:
    """The host user when it is not root (its files stay its own), else the images' `bench`."""
    uid = os.getuid()
    return CONTAINER_USER if uid == 0 else f"{uid}:{os.getgid()}"


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# NVIDIA's recommendation: name -> (soft, hard); -1 is unlimited.
ULIMITS = {"memlock": (-1, -1), "stack": (STACK_BYTES, STACK_BYTES)}


def host_capped_ulimits() -> dict[str, tuple[int, int]]:
    """ULIMITS lowered to this host's hard limits, for engines that may not raise them (a dockerd
    without CAP_SYS_RESOURCE: "error setting rlimit ... operation not permitted")."""
    capped = {}
    for name, (soft, hard) in ULIMITS.items():
        limit = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))[1]
        if limit == resource.RLIM_INFINITY:
            capped[name] = (soft, hard)
        else:
            hard = limit if hard == -1 else min(hard, limit)
            capped[name] = (hard if soft == -1 else min(soft, hard), hard)
    return capped


def run_options(image: str, work_dir: Path, env: dict[str, str], *, labels: dict[str, str],
                gpu_id: str | None, user: str = CONTAINER_USER, code_dir: Path | None = None,
                shm_size: str = SHM_SIZE, mem_limit: str | None = None,
                ulimits: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """Keyword arguments of `client.containers.create` for one cell × repeat (a pure function:
    the unit tests check exactly what the engine is asked for)."""
    from docker.types import DeviceRequest, Mount, Ulimit

    code_dir = code_dir or REPO_ROOT / "runner"
    # The cell's variables, minus those the runner owns (PATH stays the image's). A new container
    # starts with empty compilation caches under its own HOME, whatever [run]
    # keep_compile_caches says (nothing of the host's is mounted).
    environment = {**{k: v for k, v in env.items() if k not in RUNNER_OWNED_ENV},
                   "PYTHONPATH": CODE_ROOT, "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1", "HOME": "/tmp",
                   COMPILE_CACHE_ENV: "fresh"}
    devices = []
    if gpu_id is not None:
        devices.append(DeviceRequest(driver="nvidia", device_ids=[str(gpu_id)],
                                     capabilities=GPU_CAPABILITIES))
        # A framework that does not see the GPU it was given fails the cell instead of running on
        # the CPU (JAX, for one, falls back silently; JAX_PLATFORMS=cuda makes it fail loudly).
        environment.update(gpu_hand_off())
        environment.setdefault("JAX_PLATFORMS", "cuda")
    options: dict[str, Any] = dict(
        image=image,
        command=["python", "-P", "-m", "runner.worker", f"{CELL_DIR}/spec.json",
                 f"{CELL_DIR}/result.json"],
        working_dir=CELL_DIR,
        user=user,
        environment=environment,
        mounts=[Mount(f"{CODE_ROOT}/runner", str(code_dir), type="bind", read_only=True),
                Mount(CELL_DIR, str(work_dir), type="bind", read_only=False)],
        network_mode="none",
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        read_only=True,
        tmpfs=dict(TMPFS),
        pids_limit=PIDS_LIMIT,
        init=True,
        shm_size=shm_size,
        ulimits=[Ulimit(name=name, soft=soft, hard=hard)
                 for name, (soft, hard) in (ulimits or ULIMITS).items()],
        device_requests=devices,
        labels={LABEL_RUNNER: "1", **labels},
        detach=True,
        stdin_open=False,
        tty=False,
    )
    if mem_limit:
        options.update(mem_limit=mem_limit, memswap_limit=mem_limit)
    return options


def remove_leftovers(client: Any) -> list[str]:
    """Remove the runner's containers that no live runner owns: on this host, those whose owning
    process is gone (a killed run); from other hosts sharing the engine, those that stopped.
    Another live run's containers stay, whatever their state."""
    removed = []
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL_RUNNER}):
        owner = (container.labels or {}).get(LABEL_OWNER, "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host == host:
            orphan = not (pid.isdigit() and _pid_alive(int(pid)))
        else:
            orphan = container.status in ("exited", "dead")
        if orphan:
            try:
                container.remove(force=True)
                removed.append(container.short_id)
            except Exception:  # removed meanwhile by someone else: fine
                pass
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DockerExecutor(ImageExecutor):
    name = "docker"

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False,
                 gpu_id: str | None = None, base: str | None = None, mem_limit: str | None = None):
        self.flavour = flavour or Flavour("cpu", "default")
        self.gpu = gpu                    # the host has a GPU: cells that want one get it
        self.gpu_id = gpu_id if gpu_id is not None else os.environ.get(GPU_ENV, "0")
        self.base = base                  # None: DL_BENCH_BASE_IMAGE or the Dockerfile's default
        self.mem_limit = mem_limit or os.environ.get(MEMORY_ENV) or None
        self.log_caps = log_caps()       # checked here: a bad setting stops the run early
        self._client: Any = None
        self.image_ids: dict[str, str] = {}
        self.ulimits = ULIMITS            # lowered once if the engine refuses them
        self._in_flight: InFlight[Any] = InFlight()   # containers (parallel lanes)
        self._lock = threading.Lock()
        # Source key -> the exact image to run instead of the recipe's (an image id or a
        # REGISTRY/NAME@sha256:… reference): `runner reproduce` runs the images a run used.
        self.exact_images: dict[str, str] = {}
        # Source key -> metadata an exact image's records carry beyond what the engine says (the
        # recorded digest of an image named by its id: an archive loads no repo digests).
        self.exact_image_metadata: dict[str, dict[str, Any]] = {}
        self.engine = EngineSettings.from_env()
        self.lost: str | None = None      # why no further cell can run: the engine is gone
        self._slow_cells = 0              # cells in a row the engine was too slow for

    def client(self) -> Any:
        if self._client is None:
            from requests.exceptions import RequestException

            client = connect(self.engine.timeout_s)
            try:
                remove_leftovers(client)
            except RequestException as exc:
                client.close()
                raise DockerUnavailable(f"the Docker engine did not list its containers "
                                        f"({type(exc).__name__}: {exc})") from None
            self._client = client
        return self._client

    def image(self, source_key: str) -> Any:
        return self.client().images.get(self.image_ids[source_key])

    def run_exact_image(self, source_key: str, image: str,
                        metadata: dict[str, Any] | None = None) -> None:
        self.exact_images[source_key] = image
        if metadata is not None:
            self.exact_image_metadata[source_key] = metadata

    def push(self, source: Source, registry: str) -> dict[str, Any]:
        rec = self.recipe(source)
        image = self.image(source.key)
        reference = images.push(self.client(), image, rec, registry, lambda line: None)
        return {"image": reference, "image_id": image.id, "flavour": rec.flavour,
                "lock": f"images/{rec.name}/{rec.lock.name}", "lock_sha256": rec.lock_sha256,
                "recipe_sha256": rec.recipe_sha256}

    def built_lock_sha256(self, prepared: Prepared) -> str | None:
        """The lock hash the built image carries in its label."""
        return (self.image(prepared.key).labels or {}).get(f"{images.LABEL}.lock-sha256")

    def recipe(self, source: Source) -> images.Recipe:
        return images.recipe(source.image, image_flavour(self.flavour, source.image), self.base)

    def would_use(self, source: Source) -> tuple[str | None, str]:
        """(flavour, image tag) without touching the engine."""
        if source.pinned or source.key in self.exact_images:
            return None, self.exact_images.get(source.key, source.image)
        try:
            rec = self.recipe(source)
        except images.ImageError as exc:
            return image_flavour(self.flavour, source.image), str(exc)
        return rec.flavour, rec.tag

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        import docker.errors
        from requests.exceptions import RequestException

        flavour, uses = self.would_use(source)
        if source.pinned or source.key in self.exact_images:
            return self.prepare_exact(source, uses, on_line)
        try:
            client = self.client()
            rec = self.recipe(source)
            built, _ = images.ensure(client, rec, on_line)
        except (DockerUnavailable, images.ImageError) as exc:
            return Prepared(source.key, uses, flavour, error=str(exc))
        except docker.errors.DockerException as exc:
            return Prepared(source.key, uses, flavour, error=f"image {source.image}: docker: {exc}")
        except RequestException as exc:     # the engine stopped answering
            return Prepared(source.key, uses, flavour,
                            error=f"image {source.image}: {engine_silence(exc, self.engine)}")
        self.image_ids[source.key] = built.id   # run by id: a rebuild cannot swap it mid-run
        return Prepared(source.key, uses, flavour,
                        metadata={**images.record_metadata(built, rec), "env_source": "image",
                                  "flavour": rec.flavour})

    def prepare_exact(self, source: Source, uses: str,
                      on_line: Callable[[str], None]) -> Prepared:
        """An image run exactly as it is: by digest (pulled when missing) or by its id."""
        import docker.errors
        from requests.exceptions import RequestException

        try:
            client = self.client()
            if "@" in uses:
                image = images.pull_pinned(client, uses, on_line)
            else:
                image = client.images.get(uses)
        except (DockerUnavailable, images.ImageError) as exc:
            return Prepared(source.key, uses, error=str(exc))
        except docker.errors.DockerException as exc:
            return Prepared(source.key, uses, error=f"image {uses}: docker: {exc}")
        except RequestException as exc:     # the engine stopped answering
            return Prepared(source.key, uses, error=f"image {uses}: "
                            f"{engine_silence(exc, self.engine)}")
        self.image_ids[source.key] = image.id
        metadata = {**images.pinned_metadata(image, uses),
                    **self.exact_image_metadata.get(source.key, {})}
        return Prepared(source.key, uses, metadata.get("flavour"), metadata=metadata)

    def gpu_for(self, attempt: Attempt) -> str | None:
        """The GPU a cell's container is given: its lane's, else DL_BENCH_GPU's first."""
        gpu = given_gpu(attempt, self.gpu)
        if gpu is None:
            return None
        return gpu.device_id if gpu.device_id is not None else self.gpu_id

    def options_for(self, prepared: Prepared, attempt: Attempt) -> dict[str, Any]:
        labels = {LABEL_OWNER: owner_label(), LABEL_RUN: attempt.spec.run_id,
                  LABEL_CELL: attempt.key}
        # The engine binds absolute paths only (a relative --results-dir gives relative ones).
        return run_options(self.image_ids.get(prepared.key, prepared.key),
                           attempt.work_dir.resolve(), attempt.env, labels=labels,
                           gpu_id=self.gpu_for(attempt), user=container_user(),
                           mem_limit=self.mem_limit, ulimits=self.ulimits)

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        """One container for one cell × repeat. An engine that stays slow or goes away fails
        the cell with one line (and marks the executor lost when it is gone), never the run."""
        import docker.errors

        started = time.monotonic()
        try:
            container = self.start(self.client(), prepared, attempt)
        except EngineProblem as exc:
            return self.engine_failed(attempt, started, exc, removed=True)
        except (DockerUnavailable, docker.errors.DockerException) as exc:  # the cell crashed
            note_in_log(attempt.log_path, f"docker could not start the container: {exc}")
            return Outcome(returncode=None, timed_out=False, wall_s=time.monotonic() - started,
                           log_tail=log_tail(attempt.log_path))
        with self._in_flight.holding(container):
            return self.follow(container, attempt, started)

    def follow(self, container: Any, attempt: Attempt, started: float) -> Outcome:
        """A started container to its end: its log saved, its GPU sampled from the host, its
        exit (or timeout) read, the container removed however it ends."""
        logger = threading.Thread(target=save_logs,
                                  args=(container, attempt.log_path, self.log_caps),
                                  name="container-logs", daemon=True)
        logger.start()
        gpu_id = options_gpu(container.attrs) if self.gpu else None
        monitor = host_gpu_monitor(gpu_id) if gpu_id is not None else None
        host_gpu, problem, removed = None, None, False
        try:
            timed_out = self.wait_for_exit(container, attempt, started)
            wall_s = time.monotonic() - started
            call("describe the container", container.reload, self.engine)
            state = container.attrs.get("State", {})
        except EngineProblem as exc:
            problem = exc
        finally:  # also on Ctrl-C: never leave a container behind
            if monitor is not None:
                host_gpu = save_host_gpu(monitor, attempt.work_dir / HOST_GPU_FILE)
            logger.join(timeout=10)
            removed = self.remove(container)
        if problem is not None:
            return self.engine_failed(attempt, started, problem, removed)
        self.engine_answered()
        return Outcome(returncode=None if timed_out else state.get("ExitCode"),
                       timed_out=timed_out, wall_s=wall_s,
                       oom_killed=bool(state.get("OOMKilled")) and not timed_out,
                       log_tail=log_tail(attempt.log_path), host_gpu=host_gpu)

    def wait_for_exit(self, container: Any, attempt: Attempt, started: float) -> bool:
        """Wait until the container exits; past the cell's timeout kill it. True if killed.
        The wait's own read timeout is what is left of the cell's timeout (a dropped
        connection is waited on again with what is left)."""
        def wait_rest() -> Any:
            return container.wait(timeout=max(1.0, started + attempt.timeout - time.monotonic()))

        try:
            call("report the container's exit", wait_rest, self.engine)
            return False
        except EngineSlow:      # the wait timed out: the cell ran too long
            pass
        call("kill the container", lambda: kill_quietly(container), self.engine)
        call("stop the killed container", lambda: container.wait(timeout=self.engine.timeout_s),
             self.engine)
        return True

    def remove(self, container: Any) -> bool:
        """Remove the cell's container; False when the engine could not be asked to."""
        try:
            call("remove the container", lambda: remove_quietly(container), self.engine)
        except EngineProblem:
            return False
        return True

    def engine_answered(self) -> None:
        with self._lock:
            self._slow_cells = 0

    def engine_failed(self, attempt: Attempt, started: float, problem: EngineProblem,
                      removed: bool) -> Outcome:
        """The cell's record says what the engine did not do; an engine that is gone (or was
        too slow SLOW_LIMIT cells in a row) marks this executor lost, so the run stops."""
        error = str(problem) + ("" if removed else "; its container could not be removed "
                                "(the next run on this engine removes it)")
        with self._lock:
            if isinstance(problem, EngineSlow):
                self._slow_cells += 1
                if self._slow_cells >= SLOW_LIMIT and self.lost is None:
                    self.lost = f"the Docker engine was too slow {SLOW_LIMIT} cells in a row " \
                                f"({problem})"
            elif self.lost is None:
                self.lost = f"the Docker engine is gone ({problem})"
        note_in_log(attempt.log_path, error)
        write_crashed_result(attempt, error)
        return Outcome(returncode=None, timed_out=False, wall_s=time.monotonic() - started,
                       log_tail=log_tail(attempt.log_path))

    def start(self, client: Any, prepared: Prepared, attempt: Attempt) -> Any:
        """Create and start the cell's container; if the engine may not raise the ulimits,
        lower them to the host's limits once, say so in the log, and go on. EngineProblem when
        the engine does not answer (the container, if made, is removed)."""
        import docker.errors

        for retry in (False, True):
            options = self.options_for(prepared, attempt)
            options["name"] = container_name(options["labels"].get(LABEL_CELL, "cell"))
            give_container_the_work_dir(attempt.work_dir, options["user"])
            container = self.create(client, options)
            try:
                call("start the container", container.start, self.engine)
                return container
            except EngineProblem:
                self.remove(container)
                raise
            except docker.errors.APIError as exc:
                self.remove(container)
                if retry or "rlimit" not in str(exc) or self.ulimits != ULIMITS:
                    raise
                self.ulimits = host_capped_ulimits()
                note_in_log(attempt.log_path, f"the engine refused NVIDIA's ulimits; using the "
                            f"host's limits {self.ulimits}")
        raise AssertionError("unreachable")

    def create(self, client: Any, options: dict[str, Any]) -> Any:
        """Create the container under its unique name: a try repeated after a dropped
        connection finds the one the engine made meanwhile instead of making a second one.
        An engine too slow to answer may still make it: it is removed by name."""
        import docker.errors

        name = options["name"]

        def create_once() -> Any:
            try:
                return client.containers.create(**options)
            except docker.errors.APIError as exc:
                if exc.status_code == 409 and "already in use" in str(exc):
                    return client.containers.get(name)
                raise

        try:
            return call("create the container", create_once, self.engine)
        except EngineSlow:
            self.remove_named(client, name)
            raise

    def remove_named(self, client: Any, name: str) -> None:
        try:
            call("remove the container", lambda: remove_quietly(name, client), self.engine)
        except EngineProblem:
            pass    # closing the executor sweeps this runner's containers once more

    def interrupt(self) -> None:
        if self.lost:       # the engine is gone: nothing can be killed through it
            return
        for container in self._in_flight.snapshot():     # each lane's wait then returns and removes its container
            try:
                call("kill the container", lambda: kill_quietly(container), self.engine,
                     retry=False)
            except EngineProblem:
                pass

    def close(self) -> None:
        if self._client is not None:
            if self.lost is None:
                remove_own(self._client, self.engine)
            self._client.close()
            self._client = None


def engine_silence(exc: Exception, settings: EngineSettings) -> str:
    """One line for a request the engine did not answer while an environment was prepared."""
    if classify(exc) == "slow":
        return f"the Docker engine did not answer in {settings.timeout_s:g} s ({TIMEOUT_ENV})"
    return f"the Docker engine did not answer ({reason(exc)})"


def container_name(cell: str) -> str:
    """dl-bench-<cell id>-r<k>-<random>: unique, so that a create tried twice cannot make two."""
    import secrets

    return f"dl-bench-{cell}-{secrets.token_hex(4)}"


def kill_quietly(container: Any) -> None:
    import docker.errors

    try:
        container.kill()
    except docker.errors.APIError:  # it exited between the timeout and the kill
        pass


def remove_quietly(container: Any, client: Any = None) -> None:
    """Remove a container (an object, or a name with its client); one already gone is fine."""
    import docker.errors

    try:
        if client is not None:
            client.api.remove_container(container, force=True)
        else:
            container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:      # 409: its removal is already in progress
            raise


def remove_own(client: Any, settings: EngineSettings) -> None:
    """At the end of a run: remove every container this runner process made that is still
    there (one an engine too slow to answer made after the runner gave up on it)."""
    try:
        mine = call("list the runner's containers", lambda: client.containers.list(
            all=True, filters={"label": f"{LABEL_OWNER}={owner_label()}"}), settings)
        for container in mine:
            call("remove the container", lambda: remove_quietly(container), settings)
    except EngineProblem:
        pass


def options_gpu(attrs: dict[str, Any]) -> str | None:
    """The GPU id a container was given (from its device request), or None."""
    for request in (attrs.get("HostConfig") or {}).get("DeviceRequests") or []:
        ids = request.get("DeviceIDs") or []
        if ids:
            return str(ids[0])
    return None


def host_gpu_monitor(gpu_id: str) -> Any:
    """Sample the cell's GPU from the host over the container's lifetime (nvidia-ml-py on the
    host: device counters need no PID, and PIDs inside a container are not the host's). The
    worker samples its timed window from inside as well; this is the cross-check. None without
    NVML."""
    from ..worker.monitor import Monitor, Nvml

    try:
        import pynvml

        pynvml.nvmlInit()
        if gpu_id.startswith(("GPU-", "MIG-")):
            handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_id)
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(gpu_id))
    except Exception:  # no library, no driver, no such device: no host figures
        return None
    return Monitor(gpu=Nvml(pynvml, handle)).__enter__()


def save_host_gpu(monitor: Any, path: Path) -> dict[str, Any]:
    """host_gpu.json beside the cell's result (kept with the cell's work files), and the record's
    host_gpu field: GPU figures over the container's whole life."""
    from ..worker.protocol import write_json_atomic

    monitor.__exit__(None, None, None)
    # The host's CPU figures would count the container's worker as another process.
    summary = {k: v for k, v in monitor.summary().items()
               if k not in ("cpu_util_mean", "host_other_cpu")}
    summary.update(window="container lifetime, sampled from the host", window_s=monitor.window_s)
    try:
        write_json_atomic(path, summary)
    except OSError:
        pass
    return summary


def give_container_the_work_dir(work_dir: Path, user: str) -> None:
    """A root host writes spec.json as root (mode 0600): hand the folder to the container user so
    it can read the spec and write its result. A non-root host runs the container as itself."""
    if os.getuid() != 0:
        return
    uid, gid = (int(part) for part in user.split(":"))
    for path in [work_dir, *work_dir.iterdir()]:
        os.chown(path, uid, gid)


def save_logs(container: Any, log_path: Path, caps: tuple[int, int] | None = None) -> None:
    """Stream the container's stdout and stderr into the cell's log file as they come, capped
    as a local worker's log is (its first and last bytes kept, the cut said)."""
    head, tail_bytes = caps or log_caps()
    log = CappedLog(log_path, head, tail_bytes)
    stream = None
    try:
        stream = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        for chunk in stream:
            log.write(chunk)
    except Exception as exc:  # the container went away mid-stream: keep what we have
        log.write(f"\n[runner: log stream ended: {exc}]\n".encode())
    finally:
        if stream is not None:
            stream.close()
        log.close()
