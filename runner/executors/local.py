"""The embedded default: one local virtual environment per image folder (built from the lock of
the run's flavour) or an existing interpreter, one fresh process per cell × repeat.

Each worker runs under a small supervisor (supervisor.py) in a session of its own: the
supervisor keeps every process the worker starts below it (a child subreaper), kills them all
when the worker exits, on timeout, on Ctrl-C or SIGTERM, and when the runner itself dies, and
caps the worker's log. Workers start from a small, stated environment, not the host's."""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

from .. import settings
from ..environments import (Flavour, Source, derived_uses, existing, folder_flavour, installed,
                            lock_of, lock_path, venvs)
from ..paths import REPO_ROOT
from ..worker.protocol import COMPILE_CACHE_ENV
from ..worker.user_code import STAGED_ENV
from .base import (Attempt, Executor, InFlight, Outcome, Prepared, given_gpu, gpu_hand_off,
                   log_tail, note_in_log)

KILL_GRACE_S = 5.0
SUPERVISOR = Path(__file__).with_name("supervisor.py")

# The host variables every worker inherits (pyperf's --inherit-environ model): where home and
# temporary files are, language and time zone, the tools on PATH, where the host's libraries
# are (a GPU VM or pod may find its driver's libcuda through LD_LIBRARY_PATH), and which GPUs
# the host lets it see. Anything else of the host (credentials, RAY_*, the runner's own
# settings, XLA_FLAGS, OMP_NUM_THREADS, ...) stays out unless DL_BENCH_INHERIT_ENV names it; a
# cell's variables come from the matrix's `env`.
INHERITED_ENV = ("HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "PATH",
                 "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_*")
# What the runner decides for every worker: a matrix's `env` never overrides these (the worker
# imports the runner's code from its checkout, with the tools the host's PATH names, and loads
# no library the matrix slips in).
RUNNER_OWNED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
                    "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE", "PATH", "LD_PRELOAD")
# A worker's log keeps its first and last bytes: a flood cannot fill the disk.


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


def sweep(worker_id: str) -> list[int]:
    """SIGKILL every process that carries this attempt's id in its environment: what a killed
    supervisor could not take with it. The pids it killed."""
    import psutil

    killed = []
    for proc in psutil.process_iter(["environ"]):
        if (proc.info.get("environ") or {}).get(settings.WORKER_ID) != worker_id:
            continue
        try:
            proc.kill()
            killed.append(proc.pid)
        except psutil.Error:
            pass
    return killed


def inherited_names(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """INHERITED_ENV plus what DL_BENCH_INHERIT_ENV adds (names, or prefixes ending in *)."""
    return INHERITED_ENV + tuple(settings.get(settings.INHERIT_ENV, environ))


def inherited_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host variables DL_BENCH_INHERIT_ENV adds to every worker's, with their values (what
    the record's inherited_env keeps: they decide comparability, as the matrix's env does)."""
    environ = os.environ if environ is None else environ
    added = inherited_names(environ)[len(INHERITED_ENV):]
    return {k: v for k, v in sorted(environ.items())
            if any(fnmatch.fnmatchcase(k, pattern) for pattern in added)}


def worker_environment(matrix_env: dict[str, str], runner_env: dict[str, str],
                       inherit: tuple[str, ...] = INHERITED_ENV,
                       environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A worker's whole environment, in this order: the host variables `inherit` names, the
    cell's own (the matrix's `env`, minus RUNNER_OWNED_ENV), then the runner's (its import
    path, the GPU it pins, ...), which nothing overrides."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items()
           if any(fnmatch.fnmatchcase(k, pattern) for pattern in inherit)}
    env.update({k: v for k, v in matrix_env.items() if k not in RUNNER_OWNED_ENV})
    # PYTHONSAFEPATH (-P): the working directory is not put on sys.path, so a folder named jax
    # or torch there cannot shadow the real package (an older existing interpreter ignores it;
    # the cell's work folder holds only its spec and result anyway).
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONSAFEPATH="1")
    env.update(runner_env)
    return env


def probe_environment(inherit: tuple[str, ...] = INHERITED_ENV) -> dict[str, str]:
    """What an interpreter is asked its version with: a worker's environment without a cell
    (the host variables `inherit` names and the runner's own), never the host's whole one."""
    return worker_environment({}, {}, inherit)


# Where the frameworks keep compiled kernels between processes (under HOME or /tmp by default):
# torch.compile's inductor and its Triton kernels, the CUDA driver's PTX-to-cubin cache, and the
# XDG cache of everything else. JAX keeps nothing unless its persistent cache is switched on,
# and then JAX_COMPILATION_CACHE_DIR is redirected too.
COMPILE_CACHE_FOLDERS = {"TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton",
                         "CUDA_CACHE_PATH": "cuda", "XDG_CACHE_HOME": "xdg"}
JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
COMPILE_CACHE_DIR = "compile-cache"


def compile_cache_environment(work_dir: Path, env: dict[str, str],
                              cell_env: dict[str, str]) -> dict[str, str]:
    """What to add to a worker's environment `env` for its compilation caches: empty folders in
    the attempt's own work folder (compile_s cold in every repeat, as in a new container) and
    COMPILE_CACHE_ENV = "fresh"; or only "kept" where [run] keep_compile_caches asked for the
    user's caches, or where the matrix's env names a cache folder itself (it wins)."""
    chosen = [name for name in (*COMPILE_CACHE_FOLDERS, JAX_CACHE_VARIABLE) if name in cell_env]
    if cell_env.get(COMPILE_CACHE_ENV) == "kept" or chosen:
        return {COMPILE_CACHE_ENV: "kept"}
    root = work_dir / COMPILE_CACHE_DIR
    folders = dict(COMPILE_CACHE_FOLDERS)
    if JAX_CACHE_VARIABLE in env:           # switched on (inherited): redirected, not turned on
        folders[JAX_CACHE_VARIABLE] = "jax"
    return {**{name: str(root / folder) for name, folder in folders.items()},
            COMPILE_CACHE_ENV: "fresh"}


def log_caps(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(head, tail) bytes a worker's log keeps: DL_BENCH_LOG_HEAD_MB / _TAIL_MB, or 1 and 4."""
    head, tail = (settings.get(name, environ) for name in (settings.LOG_HEAD_MB, settings.LOG_TAIL_MB))
    return max(1, int(head * 2**20)), max(1, int(tail * 2**20))


def memory_limit(environ: Mapping[str, str] | None = None) -> int:
    """Bytes a cell's processes may hold (DL_BENCH_LOCAL_MEMORY), 0 for no limit."""
    size = settings.get(settings.LOCAL_MEMORY, environ)
    return settings.memory_bytes(size) if size else 0


def supervised(command: list[str], log_path: Path, caps: tuple[int, int],
               memory: int = 0) -> list[str]:
    """The worker's command under its supervisor, run by the runner's own interpreter in
    isolated mode (standard library and psutil only; no variable of the cell changes it)."""
    return [sys.executable, "-I", str(SUPERVISOR), "--parent", str(os.getpid()),
            "--log", str(log_path), "--head", str(caps[0]), "--tail", str(caps[1]),
            "--memory", str(memory), "--", *command]


class LocalExecutor(Executor):
    name = "local"
    runs_existing = True
    builds_venvs = True
    lost = None                 # local processes need no engine that could go away

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False,
                 env_root: Path | None = None):
        self.flavour = flavour or Flavour("cpu", "default")
        self.gpu = gpu                      # the host has a GPU: workers that want one get it
        self.env_root = env_root
        self.inherit = inherited_names()      # checked here: a bad setting stops the run early
        self.inherited = inherited_values()   # ... and recorded (a comparability key)
        self.log_caps = log_caps()
        self.memory = memory_limit()
        self._in_flight: InFlight[subprocess.Popen] = InFlight()   # workers (parallel lanes)

    def would_use(self, source: Source) -> tuple[str | None, str]:
        if source.existing:
            return None, f"python {source.python}"
        flavour = folder_flavour(self.flavour, source.image_folder)
        lock = lock_of(source, flavour)
        if source.derived:
            return flavour, derived_uses(source, venvs.sha256_file(lock))
        return flavour, f"images/{source.folder}/{lock.name}"

    def is_ready(self, source: Source) -> bool | None:
        if source.existing:
            return True
        flavour = folder_flavour(self.flavour, source.image_folder)
        try:
            return venvs.is_built(venvs.env_for(source.image_folder, flavour, self.env_root,
                                                lock_of(source, flavour)))
        except venvs.EnvironmentBuildError:
            return None                 # its lock is missing: preparing it says so

    def prepare(self, source: Source, on_line: Callable[[str], None]) -> Prepared:
        flavour, uses = self.would_use(source)
        if source.python is not None:       # an existing interpreter
            try:
                interpreter = existing.probe(source.python, probe_environment(self.inherit))
            except existing.InterpreterError as exc:
                return Prepared(source.key, uses, error=str(exc))
            return Prepared(source.key, uses, python=interpreter.python,
                            metadata={"executor": self.name, "env_source": "existing",
                                      **self.inherited_metadata()})
        flavour = folder_flavour(self.flavour, source.image_folder)
        try:
            env = venvs.build(source.image_folder, flavour, self.env_root, on_line,
                              lock_of(source, flavour))
        except venvs.EnvironmentBuildError as exc:
            return Prepared(source.key, uses, flavour, error=str(exc))
        return Prepared(source.key, uses, flavour, python=env.python,
                        metadata={"lock_sha256": env.lock_sha256, "env_path": str(env.path),
                                  "executor": self.name, "env_source": "lock",
                                  "flavour": flavour, **self.inherited_metadata()},
                        warnings=self.check_installed(env))

    def inherited_metadata(self) -> dict[str, Any]:
        """inherited_env for the records, where DL_BENCH_INHERIT_ENV passes any variable."""
        return {"inherited_env": self.inherited} if self.inherited else {}

    @staticmethod
    def check_installed(env: venvs.LocalEnv) -> list[str]:
        """A lock-built environment that no longer holds exactly its lock (changed by hand)."""
        try:
            found = installed.list_installed(env.python)
        except Exception as exc:  # reported, never fatal
            return [f"could not list what {env.path} holds: {exc}"]
        diff = installed.differences(installed.lock_pins(env.lock), found, venvs.seed_of(env))
        if not diff:
            return []
        shown = "; ".join(diff[:5]) + (f"; and {len(diff) - 5} more" if len(diff) > 5 else "")
        shipped = env.lock == lock_path(env.image, env.flavour)
        lock = f"images/{env.image}/{env.lock.name}" if shipped else f"its derived lock {env.lock}"
        return [f"{env.path} differs from {lock}: {shown} (delete the folder to rebuild it)"]

    def command(self, prepared: Prepared, attempt: Attempt) -> list[str]:
        return [str(prepared.python), "-m", "runner.worker", str(attempt.spec_path),
                str(attempt.result_path)]

    def runner_env(self, attempt: Attempt, worker_id: str) -> dict[str, str]:
        """The variables the runner sets for this attempt (they win over the matrix's)."""
        env = {settings.WORKER_ID: worker_id}
        if attempt.staged_code is not None:         # a user workload's code, read-only
            env[STAGED_ENV] = str(attempt.staged_code)
        gpu = given_gpu(attempt, self.gpu)
        if gpu is not None:
            env.update(gpu_hand_off())
        if gpu is not None and gpu.visible is not None:
            # The worker sees its lane's GPU only (as device 0; a data-parallel cell its lane's
            # GPUs, as 0 … N−1); an index is read in NVML's (PCI bus) order, the order the
            # runner numbered the GPUs in.
            env["CUDA_VISIBLE_DEVICES"] = gpu.visible
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        return env

    def run(self, prepared: Prepared, attempt: Attempt) -> Outcome:
        started = time.monotonic()
        worker_id = f"{os.getpid()}-{uuid.uuid4().hex[:16]}"
        ignored = sorted(k for k in attempt.env if k in RUNNER_OWNED_ENV)
        if ignored:
            note_in_log(attempt.log_path, f"env {', '.join(ignored)} of the matrix ignored: "
                        "the runner sets it")
        env = worker_environment(attempt.env, self.runner_env(attempt, worker_id), self.inherit)
        env.update(compile_cache_environment(attempt.work_dir, env, attempt.env))
        # No preexec_fn: nothing runs in the forked child before the exec (lane threads exist);
        # the supervisor sets its own death signal and checks that the runner is still there.
        process = subprocess.Popen(
            supervised(self.command(prepared, attempt), attempt.log_path, self.log_caps,
                       self.memory),
            cwd=attempt.work_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        with self._in_flight.holding(process):
            timed_out = self.wait(process, attempt, worker_id)
        return Outcome(returncode=None if timed_out else process.returncode, timed_out=timed_out,
                       wall_s=time.monotonic() - started, log_tail=log_tail(attempt.log_path))

    @staticmethod
    def wait(process: subprocess.Popen, attempt: Attempt, worker_id: str) -> bool:
        """Wait for the worker; past its timeout kill its group (True). However the wait
        ends, nothing of the attempt is left running and its fresh caches are gone."""
        try:
            process.wait(timeout=attempt.timeout)
            return False
        except subprocess.TimeoutExpired:
            kill_group(process)
            return True
        except BaseException:  # Ctrl-C, SIGTERM or anything else: never leave a worker behind
            kill_group(process)
            raise
        finally:
            # The supervisor took the worker's tree with it; a supervisor killed before it
            # could leaves its group (then SIGKILLed here) and what carries the attempt's id.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            sweep(worker_id)
            # Fresh caches are never reused: they go with the worker (they can be GBs).
            shutil.rmtree(attempt.work_dir / COMPILE_CACHE_DIR, ignore_errors=True)

    def interrupt(self) -> None:
        live = self._in_flight.snapshot()
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

    def built_lock_sha256(self, prepared: Prepared) -> str | None:
        """The lock hash in the environment's completion marker (venvs.build writes it)."""
        marker = Path(prepared.metadata.get("env_path", "")) / ".complete"
        try:
            return marker.read_text(encoding="utf-8").split()[0]
        except (OSError, IndexError):
            return None
