"""The embedded default: one local virtual environment per image, one fresh process per cell ×
repeat, in its own process group (killed whole on timeout or Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from .. import envs
from ..matrix import REPO_ROOT
from ..record import Outcome
from . import Attempt, Prepared

KILL_GRACE_S = 5.0


def tail(path: Path, lines: int = 30) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 16384))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def kill_group(process: subprocess.Popen) -> None:
    """SIGTERM the whole process group, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _die_with_parent() -> None:
    """In the child before exec: the kernel kills the worker if the runner dies (even by
    SIGKILL), so no orphan keeps computing or writes into a folder that is being reused."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def worker_environment(extra: dict[str, str]) -> dict[str, str]:
    """The host's environment, minus what would leak the host's Python into the worker, plus
    the runner package on the import path and the cell's own variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


class LocalExecutor:
    name = "local"

    def __init__(self, env_root: Path | None = None):
        self.env_root = env_root
        self.environments: dict[str, envs.LocalEnv] = {}

    def prepare(self, image: str, on_line: Callable[[str], None]) -> Prepared:
        try:
            env = envs.build(image, self.env_root, on_line)
        except envs.EnvironmentBuildError as exc:
            return Prepared(image, error=str(exc))
        self.environments[image] = env
        return Prepared(image, metadata={"lock_sha256": env.lock_sha256, "env_path": str(env.path),
                                         "executor": self.name})

    def command(self, image: str, attempt: Attempt) -> list[str]:
        # -P: the working directory is not put on sys.path (a folder named jax or torch there
        # would shadow the real package); the cell's work folder is the working directory.
        return [str(self.environments[image].python), "-P", "-m", "runner.worker",
                str(attempt.spec_path), str(attempt.result_path)]

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        started = time.monotonic()
        with attempt.log_path.open("ab") as log:
            process = subprocess.Popen(
                self.command(prepared.image, attempt), cwd=attempt.work_dir,
                env=worker_environment(attempt.env), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
            timed_out = False
            try:
                process.wait(timeout=attempt.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(process)
            except BaseException:  # Ctrl-C or anything else: never leave a worker behind
                kill_group(process)
                raise
            finally:
                # A worker that exited may have left children (compile workers) in its group.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        return Outcome(returncode=None if timed_out else process.returncode, timed_out=timed_out,
                       wall_s=time.monotonic() - started, log_tail=tail(attempt.log_path))

    def close(self) -> None:
        pass
