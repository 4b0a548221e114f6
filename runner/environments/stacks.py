"""Derived stacks: an environment built from an image folder's requirements with some changed or
added, measured beside the shipped stack:

    [environments.numpy-2-2]
    image = "numpy"
    pins = ["numpy==2.2.6"]          # replaces numpy's requirement in images/numpy/requirements.in
    packages = ["einops==0.8.1"]     # added to the stack
    api = "numpy"

For the flavour the run builds, the folder's `requirements*.in` is rewritten: a pin replaces the
requirement of its name, keeping its extras (`jax[cuda12]`), its marker and its local version
label — the label says which build (`torch==2.13.0+cpu`: `torch==2.15.0` on the CPU flavour asks
for `2.15.0+cpu`, from the index the `.in` names) — or is added where the `.in` has none (a
dependency pinned); a package is added (one the `.in` already asks for is changed with a pin).
The result is resolved exactly as the shipped locks are (locking.py: the same flags, indexes and
excludes), with the folder's own lock as the resolver's preference, so that nothing moves that
need not. The lock is cached by the hash of everything that goes into it
(~/.cache/dl-bench-runner/stacks/), written into every run folder that uses it (stacks/<env>/),
and built like any lock: a venv or an image, cached by the lock's own hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import settings
from ..paths import IMAGES_DIR
from ..schema.values import requirement
from . import LOCKS, Source, lock_path, source_path
from .locking import EXCLUDES, LockError, Request, compile_lock, differences, header
from .venvs import ENV_ROOT, sha256_file

# Unset: stacks/ beside the environments (RUNNER_ENV_DIR), wherever those are.
CACHE_ROOT: Path = settings.get(settings.STACK_CACHE) or ENV_ROOT.parent / "stacks"
RUN_FOLDER = "stacks"      # a run folder's stacks/<environment>/: the derived locks it used


class StackError(Exception):
    """A derived stack cannot be had; the message is one line (the resolver's reason)."""


@dataclass(frozen=True)
class Stack:
    """One derived stack of one flavour, resolved: its lock and that lock's sha256."""

    folder: str
    flavour: str
    pins: tuple[str, ...]
    packages: tuple[str, ...]
    lock: Path
    sha256: str

    @property
    def changes(self) -> tuple[str, ...]:
        return self.pins + self.packages

    @property
    def label(self) -> str:
        return " + ".join((f"images/{self.folder}", *self.changes))

    def source(self) -> Source:
        return Source(folder=self.folder, lock=str(self.lock), changes=self.changes)

    def moved(self, images_dir: Path = IMAGES_DIR) -> list[str]:
        """What differs from the folder's own lock of the flavour (versions, added, removed)."""
        base = lock_path(self.folder, self.flavour, images_dir)
        old = base.read_text(encoding="utf-8") if base.is_file() else None
        return differences(old, self.lock.read_text(encoding="utf-8"))


def requirement_lines(text: str) -> dict[str, int]:
    """canonical name → line number of each requirement of a requirements file."""
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines()):
        bare = line.split(" #", 1)[0].strip()
        if bare and not bare.startswith(("#", "-")):
            try:
                out[canonicalize_name(Requirement(bare).name)] = number
            except InvalidRequirement:
                continue
    return out


def replaced(original: Requirement, pin: Requirement) -> str:
    """The pin in the place of the original requirement: its version, the original's extras and
    marker, and the original's local label where the pin gives none (which build)."""
    spec = str(pin.specifier)
    old = list(original.specifier)
    new = list(pin.specifier)
    if len(old) == len(new) == 1 and old[0].operator == new[0].operator == "==" \
            and "+" in old[0].version and "+" not in new[0].version \
            and "*" not in new[0].version:
        spec = f"=={new[0].version}+{old[0].version.split('+', 1)[1]}"
    extras = sorted(original.extras | pin.extras)
    text = pin.name + (f"[{','.join(extras)}]" if extras else "") + spec
    marker = pin.marker or original.marker
    return text + (f"; {marker}" if marker else "")


def derive(base: str, pins: Sequence[str], packages: Sequence[str], where: str) -> str:
    """The `.in` of a derived stack: `base` (the folder's `.in`, named `where`) with the pins
    in place of their requirements (or added) and the packages added; StackError for a package
    the `.in` already asks for."""
    lines = base.splitlines()
    found = requirement_lines(base)
    added = []
    for text in pins:
        pin = requirement(text)
        number = found.get(canonicalize_name(pin.name))
        if number is None:
            added.append(f"{text}    # pinned by the matrix")
            continue
        original = lines[number].split(" #", 1)[0].strip()
        lines[number] = f"{replaced(Requirement(original), pin)}    # pinned by the matrix " \
                        f"(was {original})"
    for text in packages:
        package = requirement(text)
        if canonicalize_name(package.name) in found:
            raise StackError(f"packages: {package.name} is already in {where}; change its "
                             f"version with pins = [\"{package.name}==VERSION\"]")
        added.append(f"{text}    # added by the matrix")
    return "\n".join(lines + added) + "\n"


def request_for(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
                images_dir: Path = IMAGES_DIR) -> Request:
    source = source_path(folder, flavour, images_dir)
    if not source.is_file():
        raise StackError(f"images/{folder} has no {source.name} to derive a stack from")
    where = f"images/{folder}/{source.name}"
    excludes = images_dir / folder / EXCLUDES
    base_lock = lock_path(folder, flavour, images_dir)
    label = " + ".join((f"images/{folder}", *pins, *packages))
    return Request(text=derive(source.read_text(encoding="utf-8"), pins, packages, where),
                   source_name=source.name,
                   made_by=f"Derived stack {label} ({flavour}), resolved by dl-bench-runner "
                           f"over images/{folder}/{base_lock.name}",
                   excludes=excludes.read_text(encoding="utf-8") if excludes.is_file() else None,
                   prefer=base_lock.read_text(encoding="utf-8") if base_lock.is_file() else None)


def cache_key(request: Request) -> str:
    """The hash of everything that decides a derived lock: the derived `.in`, the excludes, the
    lock preferred, and the header with the resolver's flags."""
    blob = json.dumps([request.text, request.source_name, request.excludes, request.prefer,
                       header(request.made_by, request.source_name, True, True)])
    return hashlib.sha256(blob.encode()).hexdigest()


def resolve(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
            images_dir: Path = IMAGES_DIR, cache: Path | None = None,
            on_line: Callable[[str], None] = lambda line: None) -> Stack:
    """The derived stack's lock: from the cache, else resolved now (and cached); StackError."""
    from ..worker.protocol import write_text_atomic

    request = request_for(folder, flavour, pins, packages, images_dir)
    home = (cache or CACHE_ROOT) / f"{folder}-{flavour}-{cache_key(request)[:16]}"
    lock = home / LOCKS[flavour]
    if not lock.is_file():
        try:
            text = compile_lock(request, on_line)
        except LockError as exc:
            raise StackError(str(exc)) from None
        home.mkdir(parents=True, exist_ok=True)
        write_text_atomic(home / request.source_name, request.text)
        write_text_atomic(lock, text)
    return Stack(folder, flavour, tuple(pins), tuple(packages), lock, sha256_file(lock))


def recorded(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
             lock: Path) -> Stack:
    """A derived stack as a run folder recorded it (its own lock, whatever resolves today)."""
    return Stack(folder, flavour, tuple(pins), tuple(packages), lock, sha256_file(lock))


def run_folder_lock(run_dir: Path, environment: str, flavour: str) -> Path:
    return run_dir / RUN_FOLDER / environment / LOCKS[flavour]
