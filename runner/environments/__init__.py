"""Where an environment comes from, and its flavour — decided here, used by every executor.

An environment of the matrix is one of:
- an image folder `images/<name>/` whose lock the local executor builds into a virtual
  environment (`venvs`) and the Docker executor builds into an image (`images`);
- a registry image named by digest, `REGISTRY/NAME@sha256:…` (`images.pull_pinned`): exactly
  that image, pulled when missing and run by the Docker executor;
- an existing interpreter, `python = "/path/to/python"` (`existing`): a VM's preinstalled stack,
  a conda environment, a vendor container — used as it is, never built.

The flavour (cpu | cuda) picks which lock of an image folder is installed: `requirements.lock` or
`requirements-cuda.lock`. One decision per run (`decide_flavour`), the same for both executors.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..matrix import IMAGES_DIR
from ..schema import is_image_reference

FLAVOUR_ENV = "DL_BENCH_FLAVOUR"      # cpu | cuda: overrides the decision below
LOCKS = {"cpu": "requirements.lock", "cuda": "requirements-cuda.lock"}
# Every lock is compiled for the images' Python (their base is python:3.11); a lock's header
# may say so itself (`uv pip compile --python-version 3.11`).
LOCK_PYTHON = "3.11"


@dataclass(frozen=True)
class Flavour:
    """The flavour a run asks for, and why (shown in the run's first lines)."""

    name: str      # cpu | cuda
    reason: str


@dataclass(frozen=True)
class Source:
    """Where one environment's interpreter comes from: an image folder or an existing python."""

    image: str | None = None
    python: str | None = None

    @property
    def key(self) -> str:
        """What executors prepare once and cells share (several environments share an image)."""
        return self.image if self.image is not None else f"python:{self.python}"

    @property
    def existing(self) -> bool:
        return self.python is not None

    @property
    def pinned(self) -> bool:
        """A registry image named by digest (REGISTRY/NAME@sha256:…): pulled and run as it is,
        by the Docker executor only."""
        return self.image is not None and is_image_reference(self.image)


def decide_flavour(gpu_count: int, gpu_name: str | None = None) -> Flavour:
    """cuda when an NVIDIA GPU is present, else cpu; DL_BENCH_FLAVOUR overrides."""
    wanted = os.environ.get(FLAVOUR_ENV, "").strip()
    if wanted:
        if wanted not in LOCKS:
            raise UsageError(f"{FLAVOUR_ENV}={wanted!r}: expected one of {', '.join(LOCKS)}")
        return Flavour(wanted, f"{FLAVOUR_ENV}={wanted}")
    if gpu_count:
        return Flavour("cuda", f"{gpu_count} × {gpu_name or 'NVIDIA GPU'} found")
    return Flavour("cpu", "no NVIDIA GPU found")


def image_flavour(flavour: Flavour, image: str, images_dir: Path = IMAGES_DIR) -> str:
    """The flavour an image is built in: the run's, except that an image without a CUDA lock
    (NumPy, a CPU baseline) is always cpu."""
    if flavour.name == "cuda" and not (images_dir / image / LOCKS["cuda"]).is_file():
        return "cpu"
    return flavour.name


def lock_path(image: str, flavour: str, images_dir: Path = IMAGES_DIR) -> Path:
    return images_dir / image / LOCKS[flavour]


def lock_python(lock: Path) -> str:
    """The Python version a lock was compiled for (its uv header), else the images' default."""
    try:
        with lock.open(encoding="utf-8") as handle:
            head = "".join(next(handle, "") for _ in range(5))
    except OSError:
        return LOCK_PYTHON
    found = re.search(r"--python-version[ =](\d+\.\d+)", head)
    return found.group(1) if found else LOCK_PYTHON
