"""The GPU path: one image per environment, one fresh container per cell × repeat
(what a container is made of: containers.py).

Timeouts kill the container; the kernel's OOM kill is read back from the engine. Containers are
removed afterwards (also on Ctrl-C and SIGTERM). An engine that stays slow or goes away fails the
cell with one line (environments/docker_engine.py), and marks the executor lost when it is gone.

The docker SDK is imported lazily: planning and `--dry-run` never need it.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any
from collections.abc import Callable

from .. import settings
from ..environments import Flavour, Source, derived_uses, folder_flavour, images
from ..environments.docker_engine import (SLOW_LIMIT, DockerUnavailable,
                                          EngineProblem, EngineSettings, EngineSlow, call,
                                          classify, connect, reason)
from ..machine import hostinfo
from .base import (Attempt, ImageExecutor, InFlight, Outcome, Prepared, given_gpu, log_tail,
                   note_in_log, write_crashed_result)
from .containers import (LABEL_CELL, LABEL_OWNER, LABEL_RUN, ULIMITS, container_name,
                         container_user, give_container_the_work_dir, host_capped_ulimits,
                         host_gpu_monitor, kill_quietly, options_gpu, owner_label,
                         remove_leftovers, remove_own, remove_quietly, run_options,
                         save_host_gpu, save_logs)
from .local import log_caps

HOST_GPU_FILE = "host_gpu.json"             # host-side NVML summary, beside result.json


class DockerExecutor(ImageExecutor):
    name = "docker"

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False,
                 gpu_id: str | None = None, base: str | None = None, mem_limit: str | None = None):
        self.flavour = flavour or Flavour("cpu", "default")
        self.gpu = gpu                    # the host has a GPU: cells that want one get it
        # The GPU a cell gets where its lane names none (settings.GPU's first).
        self.gpu_id = gpu_id if gpu_id is not None else hostinfo.default_gpu_id()
        self.base = base                  # None: DL_BENCH_BASE_IMAGE or the Dockerfile's default
        self.mem_limit = mem_limit or settings.get(settings.DOCKER_MEMORY)
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
        lock = source.label if source.derived else f"images/{rec.name}/{rec.lock.name}"
        return {"image": reference, "image_id": image.id, "flavour": rec.flavour, "lock": lock,
                "lock_sha256": rec.lock_sha256, "recipe_sha256": rec.recipe_sha256}

    def built_lock_sha256(self, prepared: Prepared) -> str | None:
        """The lock hash the built image carries in its label."""
        return (self.image(prepared.key).labels or {}).get(f"{images.LABEL}.lock-sha256")

    def recipe(self, source: Source) -> images.Recipe:
        flavour = folder_flavour(self.flavour, source.image_folder)
        return images.recipe(source.image_folder, flavour, self.base, lock=source.lock)

    def would_use(self, source: Source) -> tuple[str | None, str]:
        """(flavour, image tag) without touching the engine."""
        if source.by_digest or source.key in self.exact_images:
            return None, self.exact_images.get(source.key) or source.key   # a reference's key is itself
        try:
            rec = self.recipe(source)
        except images.ImageError as exc:
            return folder_flavour(self.flavour, source.image_folder), str(exc)
        return rec.flavour, derived_uses(source, rec.lock_sha256, rec.tag)

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        import docker.errors
        from requests.exceptions import RequestException

        flavour, uses = self.would_use(source)
        if source.by_digest or source.key in self.exact_images:
            return self.prepare_exact(source, uses, on_line)
        try:
            client = self.client()
            rec = self.recipe(source)
            built, _ = images.ensure(client, rec, on_line)
        except (DockerUnavailable, images.ImageError) as exc:
            return Prepared(source.key, uses, flavour, error=str(exc))
        except docker.errors.DockerException as exc:
            return Prepared(source.key, uses, flavour,
                            error=f"image {source.folder}: docker: {exc}")
        except RequestException as exc:     # the engine stopped answering
            return Prepared(source.key, uses, flavour,
                            error=f"image {source.folder}: {engine_silence(exc, self.engine)}")
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
        """The GPU a cell's container is given: its lane's (several: comma-separated), else the default."""
        gpu = given_gpu(attempt, self.gpu)
        if gpu is None:
            return None
        return gpu.visible if gpu.visible is not None else self.gpu_id

    def options_for(self, prepared: Prepared, attempt: Attempt) -> dict[str, Any]:
        labels = {LABEL_OWNER: owner_label(), LABEL_RUN: attempt.spec.run_id,
                  LABEL_CELL: attempt.key}
        # The engine binds absolute paths only (a relative --results-dir gives relative ones).
        return run_options(self.image_ids.get(prepared.key, prepared.key),
                           attempt.work_dir.resolve(), attempt.env, labels=labels,
                           gpu_id=self.gpu_for(attempt), user=container_user(), mem_limit=self.mem_limit,
                           ulimits=self.ulimits, staged_code=attempt.staged_code)

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
        # Each lane's wait then returns and removes its container.
        for container in self._in_flight.snapshot():
            try:
                call("kill the container", functools.partial(kill_quietly, container), self.engine,
                     retry=False)
            except EngineProblem:
                pass

    def close(self) -> None:
        if self._client is not None:
            if self.lost is None:
                remove_own(self._client, self.engine)
            self._client.close()
            self._client = None


def engine_silence(exc: Exception, engine: EngineSettings) -> str:
    """One line for a request the engine did not answer while an environment was prepared."""
    if classify(exc) == "slow":
        return (f"the Docker engine did not answer in {engine.timeout_s:g} s "
                f"({settings.ENGINE_TIMEOUT})")
    return f"the Docker engine did not answer ({reason(exc)})"
