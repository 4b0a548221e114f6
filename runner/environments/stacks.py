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

import dataclasses
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
from . import LOCKS, Source, channels, local_builds, lock_path, source_path
from .channels import Build
from .locking import EXCLUDES, LockError, Request, compile_lock, differences, header
from .venvs import ENV_ROOT, sha256_file

# Unset: stacks/ beside the environments (RUNNER_ENV_DIR), wherever those are.
CACHE_ROOT: Path = settings.get(settings.STACK_CACHE) or ENV_ROOT.parent / "stacks"
RUN_FOLDER = "stacks"      # a run folder's stacks/<environment>/: the derived locks it used
BUILDS = "builds.json"     # ... and beside each, its builds that are no release


class StackError(Exception):
    """A derived stack cannot be had; the message is one line (the resolver's reason)."""


@dataclass(frozen=True)
class Follow:
    """What a derived stack's channel asks: the channel, its day (None: the newest build),
    and the distributions that follow it (channels.followed)."""

    channel: str
    date: str | None
    names: tuple[str, ...]


@dataclass(frozen=True)
class Stack:
    """One derived stack of one flavour, resolved: its lock and that lock's sha256, and the
    builds in it that are no release (a channel's dated builds, local wheels and trees)."""

    folder: str
    flavour: str
    pins: tuple[str, ...]
    packages: tuple[str, ...]
    lock: Path
    sha256: str
    builds: tuple[Build, ...] = ()

    @property
    def changes(self) -> tuple[str, ...]:
        """The pins (a local one as its build: its content, never its path), the packages,
        then the channel's builds."""
        local = {b.name: b for b in self.builds if b.origin != "nightly"}
        pins = tuple(f"{req.name} @ {local[canonicalize_name(req.name)].text}"
                     if canonicalize_name((req := Requirement(p)).name) in local and req.url
                     else p for p in self.pins)
        nightly = tuple(f"{b.build}=={b.version} (nightly {b.date})" for b in self.builds
                        if b.origin == "nightly")
        return pins + self.packages + nightly

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
        pin = requirement(text, local=True)
        number = found.get(canonicalize_name(pin.name))
        if number is None:
            added.append(f"{text}    # pinned by the matrix")
            continue
        original = lines[number].split(" #", 1)[0].strip()
        text = f"{pin.name} @ {pin.url}" if pin.url else replaced(Requirement(original), pin)
        lines[number] = f"{text}    # pinned by the matrix (was {original})"
    for text in packages:
        package = requirement(text)
        if canonicalize_name(package.name) in found:
            raise StackError(f"packages: {package.name} is already in {where}; change its "
                             f"version with pins = [\"{package.name}==VERSION\"]")
        added.append(f"{text}    # added by the matrix")
    return "\n".join(lines + added) + "\n"


def request_for(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
                images_dir: Path = IMAGES_DIR, builds: Sequence[Build] = ()) -> Request:
    """What resolving a derived stack asks: the folder's `.in` with the channel's `builds` in
    place of their releases (those excluded), then the pins and packages."""
    source = source_path(folder, flavour, images_dir)
    if not source.is_file():
        raise StackError(f"images/{folder} has no {source.name} to derive a stack from")
    where = f"images/{folder}/{source.name}"
    base = source.read_text(encoding="utf-8")
    base, left_out = channels.substituted(base, [b for b in builds if b.origin == "nightly"],
                                          requirement_lines(base))
    excludes = images_dir / folder / EXCLUDES
    excluded = (excludes.read_text(encoding="utf-8") if excludes.is_file() else "") + "".join(
        f"{name}    # a channel's build replaces it\n" for name in left_out)
    base_lock = lock_path(folder, flavour, images_dir)
    label = " + ".join((f"images/{folder}", *pins, *packages,
                        *(b.text for b in builds if b.origin == "nightly")))
    return Request(text=derive(base, pins, packages, where),
                   source_name=source.name,
                   made_by=f"Derived stack {label} ({flavour}), resolved by dl-bench-runner "
                           f"over images/{folder}/{base_lock.name}",
                   excludes=excluded or None,
                   prefer=base_lock.read_text(encoding="utf-8") if base_lock.is_file() else None)


def local_pins(pins: Sequence[str], base: Path, cache: Path) -> tuple[list[str], list[Build]]:
    """Each pin of a local wheel or tree as the pin of its build in the cache (`name @
    file:///…`), and the builds; the other pins as they are."""
    out, builds = [], []
    for text in pins:
        pin = requirement(text, local=True)
        if pin.url is None:
            out.append(text)
            continue
        try:
            found, wheel = local_builds.build(pin.name, pin.url, base, cache)
        except (local_builds.LocalBuildError, OSError) as exc:
            raise StackError(f"{pin.name} @ {pin.url}: {exc}") from None
        builds.append(found)
        out.append(f"{pin.name} @ {wheel.as_uri()}")
    return out, builds


def cache_key(request: Request) -> str:
    """The hash of everything that decides a derived lock: the derived `.in`, the excludes, the
    lock preferred, and the header with the resolver's flags."""
    blob = json.dumps([request.text, request.source_name, request.excludes, request.prefer,
                       header(request.made_by, request.source_name, True, True)])
    return hashlib.sha256(blob.encode()).hexdigest()


def resolve(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
            images_dir: Path = IMAGES_DIR, cache: Path | None = None,
            on_line: Callable[[str], None] = lambda line: None, follow: Follow | None = None,
            base: Path | None = None) -> Stack:
    """The derived stack's lock: from the cache, else resolved now (and cached); StackError.
    `follow`: the channel it follows; `base`: the folder local pins are relative to."""
    from ..worker.protocol import write_text_atomic

    cache = cache or CACHE_ROOT
    builds: list[Build] = []
    if follow is not None:
        source = source_path(folder, flavour, images_dir)
        asked = requirement_lines(source.read_text(encoding="utf-8")) if source.is_file() else {}
        try:
            builds += channels.resolve(follow.names, asked, flavour, follow.date)
        except channels.ChannelError as exc:
            raise StackError(str(exc)) from None
    resolved_pins, local = local_pins(pins, base or Path.cwd(), cache)
    builds += local
    request = request_for(folder, flavour, resolved_pins, packages, images_dir, builds)
    home = cache / f"{folder}-{flavour}-{cache_key(request)[:16]}"
    lock = home / LOCKS[flavour]
    if not lock.is_file():
        try:
            text = compile_lock(request, on_line)
        except LockError as exc:
            raise StackError(str(exc)) from None
        home.mkdir(parents=True, exist_ok=True)
        write_text_atomic(home / request.source_name, request.text)
        write_text_atomic(lock, text)
    return Stack(folder, flavour, tuple(pins), tuple(packages), lock, sha256_file(lock),
                 tuple(builds))


def recorded(folder: str, flavour: str, pins: Sequence[str], packages: Sequence[str],
             lock: Path) -> Stack:
    """A derived stack as a run folder recorded it (its own lock and builds, whatever
    resolves today)."""
    builds = lock.parent / BUILDS
    found = json.loads(builds.read_text(encoding="utf-8")) if builds.is_file() else []
    return Stack(folder, flavour, tuple(pins), tuple(packages), lock, sha256_file(lock),
                 tuple(Build(**b) for b in found))


def builds_json(stack: Stack) -> str:
    """The run folder's stacks/<environment>/builds.json: the stack's builds, as `recorded`
    reads them back."""
    return json.dumps([dataclasses.asdict(b) for b in stack.builds], indent=1) + "\n"


def run_folder_lock(run_dir: Path, environment: str, flavour: str) -> Path:
    return run_dir / RUN_FOLDER / environment / LOCKS[flavour]
