"""Local virtual environments built from images/<name>/requirements.lock (the embedded default).

One environment per image folder, cached under a hash of its lock file (and the Python version),
so an unchanged environment is never rebuilt. A build that did not finish leaves no `.complete`
marker and is redone from scratch next time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .matrix import IMAGES_DIR

LOCK_NAME = "requirements.lock"
ENV_ROOT = Path(os.environ.get("RUNNER_ENV_DIR", Path.home() / ".cache" / "dl-bench-runner" / "envs"))


class EnvironmentBuildError(Exception):
    pass


@dataclass(frozen=True)
class LocalEnv:
    image: str
    path: Path
    lock_sha256: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def lock_file(image: str) -> Path:
    return IMAGES_DIR / image / LOCK_NAME


def lock_sha256(image: str) -> str:
    try:
        return hashlib.sha256(lock_file(image).read_bytes()).hexdigest()
    except FileNotFoundError:
        raise EnvironmentBuildError(f"images/{image}/{LOCK_NAME} is missing") from None


def env_for(image: str, root: Path | None = None) -> LocalEnv:
    digest = lock_sha256(image)
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return LocalEnv(image, (root or ENV_ROOT) / f"{image}-{tag}-{digest[:12]}", digest)


def is_built(env: LocalEnv) -> bool:
    return (env.path / ".complete").is_file() and env.python.exists()


def installer_command(env: LocalEnv) -> list[str]:
    """uv when it is installed and the lock has no local-version pins (such as torch's `+cpu`
    build, which only pip finds through this machine's find-links); pip otherwise."""
    lock = lock_file(env.image)
    local_pins = any("+" in line.split("==", 1)[1] for line in lock.read_text().splitlines()
                     if "==" in line and not line.lstrip().startswith("#"))
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv and not local_pins:
        return [uv, "pip", "install", "--python", str(env.python), "--require-hashes",
                "--no-deps", "-r", str(lock)]
    return [str(env.python), "-m", "pip", "install", "--require-hashes", "--no-deps",
            "--disable-pip-version-check", "-r", str(lock)]


def build(image: str, root: Path | None = None,
          on_line: Callable[[str], None] = lambda line: None) -> LocalEnv:
    """Return a ready environment for `image`, building it when its lock changed."""
    env = env_for(image, root)
    if is_built(env):
        return env
    if env.path.exists():
        shutil.rmtree(env.path)  # an interrupted build
    env.path.parent.mkdir(parents=True, exist_ok=True)
    log_path = env.path.with_suffix(".log")
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        for command in ([sys.executable, "-m", "venv", str(env.path)], installer_command(env)):
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
                    f"building the {image!r} environment failed ({command[0]} exited "
                    f"{process.returncode}); see {log_path}")
    (env.path / ".complete").write_text(
        f"{env.lock_sha256}\nbuilt in {time.monotonic() - started:.0f} s\n", encoding="utf-8")
    return env
