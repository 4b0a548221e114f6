"""Local virtual environments built from an image folder's lock (the embedded default), or from
a derived stack's lock (stacks.py).

One environment per image folder and flavour (and per derived lock), cached under a hash of its
lock file, so an
unchanged environment is never rebuilt. The interpreter is the lock's Python (3.11): uv finds it
on the machine or fetches a managed one, so a host whose own Python differs still gets exactly
the locked stack. A build that did not finish leaves no `.complete` marker and is redone from
scratch next time. Two runs that need the same environment at once do not race: one builds it
(holding a file lock beside the folder), the other waits and then uses it. Its packages are
compiled to bytecode once, when it is built (or, built before that, when it is next used): the
workers write none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import IO

from .. import settings
from . import indexes, installed, lock_path, lock_python

ENV_ROOT: Path = settings.get(settings.ENV_DIR)


class EnvironmentBuildError(Exception):
    pass


@dataclass(frozen=True)
class LocalEnv:
    image: str
    flavour: str
    lock: Path
    path: Path
    lock_sha256: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def env_for(image: str, flavour: str = "cpu", root: Path | None = None,
            lock: Path | None = None) -> LocalEnv:
    """The environment of an image folder's lock of a flavour, or of `lock` (a derived stack's,
    made from that folder)."""
    lock = lock or lock_path(image, flavour)
    try:
        digest = sha256_file(lock)
    except FileNotFoundError:
        raise EnvironmentBuildError(f"{lock} is missing") from None
    tag = "py" + lock_python(lock).replace(".", "")
    return LocalEnv(image, flavour, lock,
                    (root or ENV_ROOT) / f"{image}-{flavour}-{tag}-{digest[:12]}", digest)


SEED_FILE = ".seed.json"     # what the fresh venv held before the lock was installed
BYTECODE_FILE = ".bytecode"  # its packages were compiled to bytecode (compile_bytecode)


def is_built(env: LocalEnv) -> bool:
    return (env.path / ".complete").is_file() and env.python.exists()


def find_uv() -> str | None:
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


def venv_command(env: LocalEnv) -> list[str]:
    """Create the venv with the lock's Python: uv finds (or fetches) that version; without uv
    the host's own interpreter must be that version."""
    wanted = lock_python(env.lock)
    uv = find_uv()
    if uv:
        return [uv, "venv", "--seed", "--quiet", "--python", wanted, str(env.path)]
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if have != wanted:
        raise EnvironmentBuildError(
            f"images/{env.image}/{env.lock.name} is locked for Python {wanted}, the runner runs "
            f"on {have}, and uv (which would fetch {wanted}) is missing: pip install uv")
    return [sys.executable, "-m", "venv", str(env.path)]


def installer_command(env: LocalEnv, lock: Path | None = None,
                      machine_config: bool = False) -> list[str]:
    """Install `lock` (default: the env's) exactly: every file pinned by its hash, no
    dependency of its own. uv, 4× faster; pip when `machine_config` — an index the lock declares
    cannot be reached from here, and pip reads this machine's own configuration (pip.conf,
    PIP_INDEX_URL, PIP_FIND_LINKS: a mirror or a wheel folder) where uv does not."""
    lock = lock or env.lock
    uv = find_uv()
    if uv and not machine_config:
        # A declared extra index (PyTorch's) also carries numpy and the like: uv's default
        # (first index that has a name wins) would look for those there alone. The hashes pin
        # every file, so taking the best match across indexes cannot change what is installed.
        strategy = ["--index-strategy", "unsafe-best-match"] if indexes.declared(lock) else []
        return [uv, "pip", "install", "--python", str(env.python), "--require-hashes",
                "--no-deps", *strategy, "-r", str(lock)]
    return [str(env.python), "-m", "pip", "install", "--require-hashes", "--no-deps",
            "--disable-pip-version-check", "-r", str(lock)]


def seed_of(env: LocalEnv) -> set[str]:
    """The distributions the venv itself installed (pip and its kin, and what they need),
    recorded when it was built; for an environment built before that was recorded, read once
    from a throwaway venv made the same way (and recorded then)."""
    try:
        return set(json.loads((env.path / SEED_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="dl-bench-seed-") as folder:
        fresh = dataclasses.replace(env, path=Path(folder) / "venv")
        try:
            subprocess.run(venv_command(fresh), check=True, capture_output=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError, EnvironmentBuildError):
            return set()
        return record_seed(fresh, into=env)


@contextlib.contextmanager
def build_lock(env: LocalEnv, on_line: Callable[[str], None]) -> Iterator[None]:
    """Hold the lock of one environment folder while building it (across processes: another
    run, or another Ray worker on the node, waits here). The kernel drops it when its holder
    dies."""
    fd = os.open(env.path.with_name(env.path.name + ".lock"),
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_line("waiting: another run is building this environment")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build(image: str, flavour: str = "cpu", root: Path | None = None,
          on_line: Callable[[str], None] = lambda line: None, lock: Path | None = None) -> LocalEnv:
    """Return a ready environment for `image` in `flavour` (or for a derived `lock` of it),
    building it when its lock changed."""
    env = env_for(image, flavour, root, lock)
    if is_built(env) and has_bytecode(env):
        return env
    env.path.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(env, on_line):
        if not is_built(env):           # another run may have built it while we waited
            build_unlocked(env, on_line)
        elif not has_bytecode(env):     # built before the runner compiled its packages
            with env.path.with_suffix(".log").open("a", encoding="utf-8") as log:
                compile_bytecode(env, log, on_line)
    return env


def has_bytecode(env: LocalEnv) -> bool:
    return (env.path / BYTECODE_FILE).is_file()


def compile_bytecode(env: LocalEnv, log: IO[str], on_line: Callable[[str], None]) -> None:
    """Compile the environment's packages to bytecode, once. A worker runs with
    PYTHONDONTWRITEBYTECODE=1 (it writes nothing beside the runner's code, nor into an image),
    so a package installed without its bytecode (uv writes none unless asked) was compiled from
    source again in every process: TensorFlow 2.15's import took 21 s of each Keras 2 process
    on this project's 2-core VM, 5 s with its bytecode. A file that does not compile (a
    template, a fixture for another Python) is left as pip leaves it; the log has its name."""
    on_line(f"compiling {env.path.name}'s packages to bytecode (once)")
    started = time.monotonic()
    command = [str(env.python), "-m", "compileall", "-q", "-j", "0",
               *(str(site) for site in sorted(env.path.glob("lib/python*/site-packages")))]
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                   cwd=env.path.parent, check=False)
    (env.path / BYTECODE_FILE).write_text(
        f"compiled in {time.monotonic() - started:.0f} s\n", encoding="utf-8")


def build_unlocked(env: LocalEnv, on_line: Callable[[str], None]) -> None:
    if env.path.exists():
        shutil.rmtree(env.path)  # an interrupted build
    log_path = env.path.with_suffix(".log")
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log, \
            tempfile.TemporaryDirectory(prefix=f"{env.image}-lock-") as scratch:
        lock, notes = indexes.usable_lock(env.lock, Path(scratch))
        for note in notes:
            log.write(f"[runner: {note}]\n")
            on_line(note)

        def step(command: list[str]) -> None:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            returncode = run_logged(command, env.path.parent, log, on_line)
            if returncode != 0:
                raise EnvironmentBuildError(
                    f"building the {env.image!r} environment ({env.flavour}) failed "
                    f"({Path(command[0]).name} exited {returncode}); see {log_path}"
                    f"{unreachable_hint(notes)}")

        step(venv_command(env))
        record_seed(env)
        step(installer_command(env, lock, machine_config=bool(notes)))
        compile_bytecode(env, log, on_line)
    (env.path / ".complete").write_text(
        f"{env.lock_sha256}\nbuilt in {time.monotonic() - started:.0f} s\n", encoding="utf-8")


def build_logs(root: Path | None = None) -> list[tuple[float, int | None]]:
    """(seconds, distributions installed) of every environment built under `root`, from the
    completion markers its builds wrote ("built in N s"): what the estimate of a build reads."""
    found = []
    for marker in sorted((root or ENV_ROOT).glob("*/.complete")):
        try:
            text = marker.read_text(encoding="utf-8")
        except OSError:
            continue
        seconds = re.search(r"built in (\d+(?:\.\d+)?) s", text)
        if seconds is None:
            continue
        count = len(list(marker.parent.glob("lib/python*/site-packages/*.dist-info")))
        found.append((float(seconds.group(1)), count or None))
    return found


def record_seed(env: LocalEnv, into: LocalEnv | None = None) -> set[str]:
    """What `env`'s venv holds now (before the lock is installed), kept in `into` (itself)."""
    try:
        seed = sorted(installed.list_installed(env.python))
        (into or env).path.joinpath(SEED_FILE).write_text(json.dumps(seed), encoding="utf-8")
    except Exception:  # without it the check falls back to pip/setuptools/wheel
        return set()
    return set(seed)


def run_logged(command: list[str], cwd: Path, log, on_line: Callable[[str], None]) -> int:
    """Run one build step, its output into the build log; interrupted (Ctrl-C, SIGTERM), the
    step is killed rather than left installing into a folder the next build removes."""
    # The with-block closes the pipe (an open one is a ResourceWarning, an error under pytest).
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, cwd=cwd) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                on_line(line.rstrip())
            return process.wait()
        except BaseException:
            process.kill()
            process.wait()
            raise


def unreachable_hint(notes: list[str]) -> str:
    """What to do when an index the lock names cannot be reached and the build failed."""
    if not notes:
        return ""
    return (f" — {notes[0].split(' cannot be reached')[0]} cannot be reached from here: point "
            "PIP_INDEX_URL or PIP_FIND_LINKS at a mirror or wheel folder that serves the lock's "
            "files (see the README, air-gapped machines)")
