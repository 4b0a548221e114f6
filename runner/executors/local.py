"""The embedded default: one local virtual environment per image folder (built from the lock of
the run's flavour) or an existing interpreter, one fresh process per cell × repeat, in its own
process group (killed whole on timeout or Ctrl-C)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from ..environments import (Flavour, Source, existing, image_flavour, installed, lock_path,
                            venvs)
from ..matrix import REPO_ROOT
from ..results.records import Outcome
from ..worker.protocol import COMPILE_CACHE_ENV, GPU_GIVEN_ENV
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
    # PYTHONSAFEPATH (-P): the working directory is not put on sys.path, so a folder named jax
    # or torch there cannot shadow the real package (an older existing interpreter ignores it;
    # the cell's work folder holds only its spec and result anyway).
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONSAFEPATH="1")
    env.update(extra)
    return env


# Where the frameworks keep compiled kernels between processes (under HOME or /tmp by default):
# torch.compile's inductor and its Triton kernels, the CUDA driver's PTX-to-cubin cache, and the
# XDG cache of everything else. JAX keeps nothing unless its persistent cache is switched on,
# and then JAX_COMPILATION_CACHE_DIR is redirected too.
COMPILE_CACHE_FOLDERS = {"TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton",
                         "CUDA_CACHE_PATH": "cuda", "XDG_CACHE_HOME": "xdg"}
JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
COMPILE_CACHE_DIR = "compile-cache"


def compile_cache_environment(work_dir: Path, cell_env: dict[str, str]) -> dict[str, str]:
    """The worker's compilation-cache variables: empty folders in the attempt's own work folder
    (compile_s cold in every repeat, as in a new container), unless the cell keeps the user's
    caches ([run] keep_compile_caches sets COMPILE_CACHE_ENV = "kept"). The cell's own
    variables still win over these."""
    if cell_env.get(COMPILE_CACHE_ENV) == "kept":
        return {COMPILE_CACHE_ENV: "kept"}
    root = work_dir / COMPILE_CACHE_DIR
    env = {name: str(root / folder) for name, folder in COMPILE_CACHE_FOLDERS.items()}
    if JAX_CACHE_VARIABLE in os.environ or JAX_CACHE_VARIABLE in cell_env:
        env[JAX_CACHE_VARIABLE] = str(root / "jax")
    env[COMPILE_CACHE_ENV] = "fresh"
    return env


class LocalExecutor:
    name = "local"

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False,
                 env_root: Path | None = None):
        self.flavour = flavour or Flavour("cpu", "default")
        self.gpu = gpu                      # the host has a GPU: workers that want one get it
        self.env_root = env_root
        self._live: set[subprocess.Popen] = set()   # workers in flight (parallel lanes)
        self._lock = threading.Lock()

    def describe(self, source: Source) -> tuple[str | None, str]:
        """(flavour, what it uses) without building anything: for the plan and the first lines."""
        if source.existing:
            return None, f"python {source.python}"
        flavour = image_flavour(self.flavour, source.image)
        return flavour, f"images/{source.image}/{lock_path(source.image, flavour).name}"

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        flavour, uses = self.describe(source)
        if source.existing:
            try:
                interpreter = existing.probe(source.python)
            except existing.InterpreterError as exc:
                return Prepared(source.key, uses, error=str(exc))
            return Prepared(source.key, uses, python=interpreter.python,
                            metadata={"executor": self.name, "env_source": "existing"})
        try:
            env = venvs.build(source.image, flavour, self.env_root, on_line)
        except venvs.EnvironmentBuildError as exc:
            return Prepared(source.key, uses, flavour, error=str(exc))
        return Prepared(source.key, uses, flavour, python=env.python,
                        metadata={"lock_sha256": env.lock_sha256, "env_path": str(env.path),
                                  "executor": self.name, "env_source": "lock",
                                  "flavour": flavour},
                        warnings=self.check_installed(env))

    @staticmethod
    def check_installed(env: venvs.LocalEnv) -> list[str]:
        """A lock-built environment that no longer holds exactly its lock (changed by hand)."""
        try:
            found = installed.list_installed(env.python)
        except Exception as exc:  # noqa: BLE001 - reported, never fatal
            return [f"could not list what {env.path} holds: {exc}"]
        diff = installed.differences(installed.lock_pins(env.lock), found)
        if not diff:
            return []
        shown = "; ".join(diff[:5]) + (f"; and {len(diff) - 5} more" if len(diff) > 5 else "")
        return [f"{env.path} differs from images/{env.image}/{env.lock.name}: {shown} "
                f"(delete the folder to rebuild it)"]

    def command(self, prepared: Prepared, attempt: Attempt) -> list[str]:
        return [str(prepared.python), "-m", "runner.worker", str(attempt.spec_path),
                str(attempt.result_path)]

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        started = time.monotonic()
        with attempt.log_path.open("ab") as log:
            extra = {**compile_cache_environment(attempt.work_dir, attempt.env), **attempt.env}
            if self.gpu and attempt.wants_gpu:
                # The host has a GPU: a framework that cannot see it fails the cell (no_gpu)
                # instead of measuring the CPU, device = "auto" included.
                extra[GPU_GIVEN_ENV] = "1"
            if attempt.gpu is not None and attempt.wants_gpu:
                # Pinned: the worker sees its lane's GPU only (as device 0); an index is read in
                # NVML's (PCI bus) order, the order the runner numbered the GPUs in.
                extra["CUDA_VISIBLE_DEVICES"] = attempt.gpu
                extra["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            process = subprocess.Popen(
                self.command(prepared, attempt), cwd=attempt.work_dir,
                env=worker_environment(extra), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
            with self._lock:
                self._live.add(process)
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
                with self._lock:
                    self._live.discard(process)
                # A worker that exited may have left children (compile workers) in its group.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                # Fresh caches are never reused: they go with the worker (they can be GBs).
                shutil.rmtree(attempt.work_dir / COMPILE_CACHE_DIR, ignore_errors=True)
        return Outcome(returncode=None if timed_out else process.returncode, timed_out=timed_out,
                       wall_s=time.monotonic() - started, log_tail=tail(attempt.log_path))

    def interrupt(self) -> None:
        with self._lock:
            live = list(self._live)
        for process in live:     # all at once: SIGTERM now, SIGKILL what is left after the grace
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + KILL_GRACE_S
        for process in live:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(process)

    def close(self) -> None:
        pass
