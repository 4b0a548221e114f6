"""Local virtual environments built from an image folder's lock (the embedded default).

One environment per image folder and flavour, cached under a hash of its lock file, so an
unchanged environment is never rebuilt. The interpreter is the lock's Python (3.11): uv finds it
on the machine or fetches a managed one, so a host whose own Python differs still gets exactly
the locked stack. A build that did not finish leaves no `.complete` marker and is redone from
scratch next time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import indexes, lock_path, lock_python

ENV_ROOT = Path(os.environ.get("RUNNER_ENV_DIR", Path.home() / ".cache" / "dl-bench-runner" / "envs"))


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


def env_for(image: str, flavour: str = "cpu", root: Path | None = None) -> LocalEnv:
    lock = lock_path(image, flavour)
    try:
        digest = sha256_file(lock)
    except FileNotFoundError:
        raise EnvironmentBuildError(f"images/{image}/{lock.name} is missing") from None
    tag = "py" + lock_python(lock).replace(".", "")
    return LocalEnv(image, flavour, lock,
                    (root or ENV_ROOT) / f"{image}-{flavour}-{tag}-{digest[:12]}", digest)


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


def build(image: str, flavour: str = "cpu", root: Path | None = None,
          on_line: Callable[[str], None] = lambda line: None) -> LocalEnv:
    """Return a ready environment for `image` in `flavour`, building it when its lock changed."""
    env = env_for(image, flavour, root)
    if is_built(env):
        return env
    if env.path.exists():
        shutil.rmtree(env.path)  # an interrupted build
    env.path.parent.mkdir(parents=True, exist_ok=True)
    log_path = env.path.with_suffix(".log")
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log, \
            tempfile.TemporaryDirectory(prefix=f"{image}-lock-") as scratch:
        lock, notes = indexes.usable_lock(env.lock, Path(scratch))
        for note in notes:
            log.write(f"[runner: {note}]\n")
            on_line(note)
        commands = (venv_command(env), installer_command(env, lock, machine_config=bool(notes)))
        for command in commands:
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, cwd=env.path.parent)
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                on_line(line.rstrip())
            if process.wait() != 0:
                raise EnvironmentBuildError(
                    f"building the {image!r} environment ({flavour}) failed ({Path(command[0]).name} "
                    f"exited {process.returncode}); see {log_path}{unreachable_hint(notes)}")
    (env.path / ".complete").write_text(
        f"{env.lock_sha256}\nbuilt in {time.monotonic() - started:.0f} s\n", encoding="utf-8")
    return env


def unreachable_hint(notes: list[str]) -> str:
    """What to do when an index the lock names cannot be reached and the build failed."""
    if not notes:
        return ""
    return (f" — {notes[0].split(' cannot be reached')[0]} cannot be reached from here: point "
            "PIP_INDEX_URL or PIP_FIND_LINKS at a mirror or wheel folder that serves the lock's "
            "files (see the README, air-gapped machines)")
