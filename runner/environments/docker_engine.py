"""The Docker engine connection: a client whose engine answered (`connect`), how long a request
may take, and what a request the engine does not answer becomes.

Requests to the Docker engine during a cell: each with a deliberate timeout, tried again only
where a second try cannot do harm, and turned into one line when the engine stays slow or goes
away — the cell fails with that line, never the run with a traceback.

- **slow**: a request the engine does not answer within DL_BENCH_ENGINE_TIMEOUT seconds fails
  the cell ("engine did not create the container in 600 s") and is not tried again (the engine
  may still be doing it). The default fits the slowest engines the runner meets: a vfs engine
  copies the whole image for every container it creates (8 GB for a CUDA image), and an engine
  busy pulling a multi-GB image answers late. SLOW_LIMIT slow cells in a row: the engine counts
  as gone.
- **gone**: the engine's socket refuses the connection or drops it. Requests that are safe to
  repeat (start, wait, inspect, kill, remove, and the create of a container with a unique name)
  are tried again with a growing pause for DL_BENCH_ENGINE_RECONNECT seconds (a restarting
  engine is back within seconds); then the cell fails and the run stops after it, saying how to
  resume.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any, TypeVar
from collections.abc import Callable

from .. import settings

DEFAULT_TIMEOUT_S = settings.SETTINGS[settings.ENGINE_TIMEOUT].default           # 600 s
DEFAULT_RECONNECT_S = settings.SETTINGS[settings.ENGINE_RECONNECT].default       # 60 s
SLOW_LIMIT = 3                  # slow cells in a row after which the engine counts as gone
FIRST_PAUSE_S, LONGEST_PAUSE_S = 1.0, 10.0
POOL_SIZE = 64                  # engine connections: 2 per running container

T = TypeVar("T")


@dataclass(frozen=True)
class EngineSettings:
    """How long the runner waits for the engine (shown by `runner doctor`)."""

    timeout_s: float = DEFAULT_TIMEOUT_S       # one request (the wait for a cell's exit apart)
    reconnect_s: float = DEFAULT_RECONNECT_S   # an unreachable engine, before the run stops

    @classmethod
    def from_env(cls) -> EngineSettings:
        return cls(settings.get(settings.ENGINE_TIMEOUT), settings.get(settings.ENGINE_RECONNECT))

    def summary(self) -> str:
        return (f"a request may take {self.timeout_s:g} s ({settings.ENGINE_TIMEOUT}), an unreachable "
                f"engine is waited for {self.reconnect_s:g} s ({settings.ENGINE_RECONNECT})")


class DockerUnavailable(Exception):
    """No engine answers, or the docker SDK is missing; the message says how to fix it."""


def connect(timeout: float | None = None) -> Any:
    """A docker SDK client whose engine answered a ping; its requests time out after `timeout`
    seconds (default: DL_BENCH_ENGINE_TIMEOUT, see engine.py)."""
    if timeout is None:
        timeout = EngineSettings.from_env().timeout_s
    try:
        import docker
        from docker.constants import MINIMUM_DOCKER_API_VERSION
    except ImportError as exc:
        raise DockerUnavailable("the docker SDK is not installed: pip install 'docker>=7' "
                                "(a dependency of the runner: reinstall it)") from exc
    problem = unix_socket_problem(os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock")
    if problem:
        raise DockerUnavailable(f"no Docker engine answers ({problem}); start one "
                                "(sudo systemctl start docker) or set DOCKER_HOST")
    # Ping with the oldest API first: from_env's version negotiation raises from inside its
    # constructor when no engine answers, leaving its socket open.
    probe = docker.from_env(version=MINIMUM_DOCKER_API_VERSION, timeout=10)
    try:
        probe.ping()
        # Parallel lanes each hold two connections (the wait and the log stream) per container.
        client = docker.from_env(timeout=int(timeout), max_pool_size=POOL_SIZE)
    except Exception as exc:  # DockerException, connection errors: all mean "no engine"
        raise DockerUnavailable(f"no Docker engine answers ({exc.__class__.__name__}: {exc}); "
                                "start one (sudo systemctl start docker) or set DOCKER_HOST") \
            from exc
    finally:
        probe.close()
    return client


def unix_socket_problem(host: str) -> str | None:
    """Why a unix:// engine socket cannot be reached, tried with our own socket (the SDK leaves
    its socket open when the connect fails); None when it answers or is not a unix socket."""
    if not host.startswith("unix://"):
        return None
    path = host[len("unix://"):]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(path)
        except OSError as exc:
            return f"{path}: {exc.strerror or exc}"
    return None


class EngineProblem(Exception):
    """A request the engine did not answer; str() is the cell's one-line reason."""


class EngineSlow(EngineProblem):
    """The engine did not answer within the timeout."""


class EngineGone(EngineProblem):
    """The engine could not be reached, and stayed so for the reconnect window."""


def causes(exc: BaseException) -> list[BaseException]:
    """exc and every exception it wraps (its args, cause and context), outermost first."""
    seen: list[BaseException] = []
    pending: list[object] = [exc]
    while pending:
        item = pending.pop(0)
        if isinstance(item, BaseException) and not any(item is s for s in seen):
            seen.append(item)
            pending += [*item.args, item.__cause__, item.__context__]
    return seen


def classify(exc: BaseException) -> str | None:
    """"slow" (a read timed out), "gone" (the connection failed or dropped), or None: an answer
    of the engine (an API error is the cell's own). requests wraps a read that times out in the
    body of an answer (the wait's) as a ConnectionError: the chain decides."""
    from requests.exceptions import ChunkedEncodingError, ConnectionError  # docker SDK deps
    from urllib3.exceptions import ProtocolError, ReadTimeoutError

    chain = causes(exc)
    if any(isinstance(e, (ReadTimeoutError, TimeoutError)) for e in chain):
        return "slow"
    if any(isinstance(e, (ConnectionError, ChunkedEncodingError, ProtocolError,
                          ConnectionError_, FileNotFoundError)) for e in chain):
        return "gone"
    return None


ConnectionError_ = ConnectionError      # the built-in (refused, reset, broken pipe)


def reason(exc: BaseException) -> str:
    """The innermost cause of a connection error, short: 'Connection refused'."""
    for item in reversed(causes(exc)):
        if isinstance(item, OSError) and item.strerror:
            return item.strerror
    for item in reversed(causes(exc)):
        text = str(item).strip().splitlines()
        if text and not text[0].startswith(("(", "<")):
            return text[0][:120]
    return type(exc).__name__


def call(what: str, request: Callable[[], T], engine: EngineSettings, *,
         retry: bool = True) -> T:
    """request(), with an engine that does not answer turned into EngineSlow or EngineGone
    whose text names `what` it did not do ("create the container"). A connection failure is
    tried again for engine.reconnect_s when `retry` (the request is safe to repeat)."""
    deadline: float | None = None
    pause = FIRST_PAUSE_S
    while True:
        try:
            return request()
        except Exception as exc:
            kind = classify(exc)
            if kind is None:
                raise
            if kind == "slow":
                raise EngineSlow(f"engine did not {what} in {engine.timeout_s:g} s "
                                 f"({settings.ENGINE_TIMEOUT})") from None
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + engine.reconnect_s
            if not retry or now >= deadline:
                waited = f" for {engine.reconnect_s:g} s" if retry else ""
                raise EngineGone(f"engine unreachable{waited} ({reason(exc)}): it did not "
                                 f"{what}") from None
            time.sleep(min(pause, max(0.0, deadline - now)))
            pause = min(pause * 2, LONGEST_PAUSE_S)
