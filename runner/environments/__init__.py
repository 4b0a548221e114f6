"""Where an environment comes from, and its flavour — decided here, used by every executor.

An environment of the matrix is one of (the matrix's `image` key names the first two, told
apart by their form):
- an image folder `images/<name>/` whose lock the local executor builds into a virtual
  environment (`venvs`) and the Docker executor builds into an image (`images`);
- an image reference, a registry image named by digest, `REGISTRY/NAME@sha256:…`
  (`images.pull_pinned`): exactly that image, pulled when missing and run by the Docker executor;
- an existing interpreter, `python = "/path/to/python"` (`existing`): a VM's preinstalled stack,
  a conda environment, a vendor container — used as it is, never built;
- a derived stack: an image folder with `pins` and `packages` (`stacks`), resolved into a lock of
  its own and built from it like a folder's.

The flavour (cpu | cuda) picks which lock of an image folder is installed: `requirements.lock` or
`requirements-cuda.lock`. One decision per run (`decide_flavour`), the same for both executors.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..paths import IMAGES_DIR
from ..schema import is_image_reference

LOCKS = {"cpu": "requirements.lock", "cuda": "requirements-cuda.lock"}
SOURCES = {"cpu": "requirements.in", "cuda": "requirements-cuda.in"}     # what each is locked from
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
    """Where one environment's interpreter comes from: exactly one of an image folder, an image
    reference or an existing python. A derived stack is an image folder with its own lock."""

    folder: str | None = None       # images/<folder>/: its locks are built (a venv or an image)
    reference: str | None = None    # REGISTRY/NAME@sha256:…: exactly that image (Docker only)
    python: str | None = None       # an existing interpreter, used as it is
    lock: str | None = None         # a derived stack's lock (stacks.py), built instead of the folder's
    changes: tuple[str, ...] = ()   # what the derived stack changes: its pins, then its packages

    @classmethod
    def of(cls, image: str | None, python: str | None = None) -> Source:
        """The source of a matrix environment (its `image` and `python` keys)."""
        if image is not None and is_image_reference(image):
            return cls(reference=image)
        return cls(folder=image, python=python)

    @property
    def key(self) -> str:
        """What executors prepare once and cells share (several environments share an image
        folder)."""
        if self.folder is not None:
            return " + ".join((self.folder, *self.changes))
        return self.reference if self.reference is not None else f"python:{self.python}"

    @property
    def image_folder(self) -> str:
        """The image folder of a source built from one; callers ask only after ruling out an
        existing interpreter and an image reference."""
        if self.folder is None:
            raise ValueError(f"{self.label} is not built from an image folder")
        return self.folder

    @property
    def existing(self) -> bool:
        return self.python is not None

    @property
    def by_digest(self) -> bool:
        """An image reference: pulled and run as it is, by the Docker executor only."""
        return self.reference is not None

    @property
    def label(self) -> str:
        """images/torch, python /opt/conda/bin/python, or the image reference."""
        if self.existing:
            return f"python {self.python}"
        if self.reference is not None:
            return self.reference
        return " + ".join((f"images/{self.folder}", *self.changes))

    @property
    def derived(self) -> bool:
        return self.lock is not None


def decide_flavour(gpu_count: int, gpu_name: str | None = None) -> Flavour:
    """cuda when an NVIDIA GPU is present, else cpu; DL_BENCH_FLAVOUR overrides."""
    wanted = settings.get(settings.FLAVOUR)          # cpu | cuda (its registry checks it)
    if wanted:
        return Flavour(wanted, f"{settings.FLAVOUR}={wanted}")
    if gpu_count:
        return Flavour("cuda", f"{gpu_count} × {gpu_name or 'NVIDIA GPU'} found")
    return Flavour("cpu", "no NVIDIA GPU found")


def folder_flavour(flavour: Flavour, folder: str, images_dir: Path = IMAGES_DIR) -> str:
    """The flavour an image folder is built in: the run's, except that a folder without a CUDA
    lock (NumPy, a CPU baseline) is always cpu."""
    if flavour.name == "cuda" and not (images_dir / folder / LOCKS["cuda"]).is_file():
        return "cpu"
    return flavour.name


def lock_path(folder: str, flavour: str, images_dir: Path = IMAGES_DIR) -> Path:
    return images_dir / folder / LOCKS[flavour]


def source_path(folder: str, flavour: str, images_dir: Path = IMAGES_DIR) -> Path:
    """The requirements*.in a folder's lock of a flavour is compiled from."""
    return images_dir / folder / SOURCES[flavour]


def lock_of(source: Source, flavour: str) -> Path:
    """The lock a source built from an image folder installs: its derived lock, else the
    folder's lock of the flavour."""
    return Path(source.lock) if source.lock is not None else lock_path(source.image_folder, flavour)


def derived_uses(source: Source, sha256: str, image: str = "") -> str:
    """What an environment uses as the plan shows it: a derived stack's origin and lock hash
    (and its image, with the Docker executor); else its image."""
    if not source.derived:
        return image
    return f"derived: {source.label} → lock sha {sha256[:12]}" + (f" (image {image})"
                                                                   if image else "")


def lock_sha256(folder: str, flavour: str, images_dir: Path = IMAGES_DIR) -> str | None:
    """The sha256 of an image folder's lock of a flavour; None when it has none. What a built
    environment is checked against (a Ray node's, a reproduction's)."""
    lock = lock_path(folder, flavour, images_dir)
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else None


def lock_python(lock: Path) -> str:
    """The Python version a lock was compiled for (its uv header), else the images' default."""
    try:
        with lock.open(encoding="utf-8") as handle:
            head = "".join(next(handle, "") for _ in range(5))
    except OSError:
        return LOCK_PYTHON
    found = re.search(r"--python-version[ =](\d+\.\d+)", head)
    return found.group(1) if found else LOCK_PYTHON
