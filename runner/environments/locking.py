"""How every lock is made: one `uv pip compile` command, declared here and nowhere else
(`python -m runner lock` makes the shipped locks with it, and derived stacks, stacks.py, too).

A lock is compiled from an image folder's `requirements*.in` for the images' Python and platform,
every file pinned by its hash:
- `--generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28` always;
- `--index-strategy unsafe-best-match` where the `.in` names an extra index (PyTorch's CPU index
  also carries numpy, jinja2 and the like: uv's default would take those from it alone; the hashes
  pin every file either way);
- `--excludes excludes.txt` where the folder has one (names left out of the resolution, e.g.
  keras-hub's tensorflow-text, which would drag full TensorFlow into the torch and JAX images).
The `.in`'s index lines are carried into the lock (pip and uv read them there); PyPI stays the
installer's default, so a machine's own mirror still applies. The lock being replaced is the
resolver's preference for versions (never for hashes: those come from the index every time):
nothing moves that need not, unless asked (`--upgrade`, `--upgrade-package NAME`). The lock's
header names the command that made it; `lock --check` compares the whole lock, hashes, markers
and option lines included, with that fresh resolution (lock_entries.py).

An index the `.in` names that this machine cannot reach (PyTorch's, from this project's CI) is
left out of the resolution and its files are looked for where `PIP_FIND_LINKS` points (a wheel
folder or a mirror), said in a note: the lock still names the index and pins the files' hashes.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..paths import IMAGES_DIR
from . import LOCK_PYTHON, LOCKS, SOURCES, indexes, lock_entries

PLATFORM = "x86_64-manylinux_2_28"
EXCLUDES = "excludes.txt"           # images/<name>/excludes.txt: left out of every resolution
FIND_LINKS_ENV = "PIP_FIND_LINKS"   # where an unreachable index's files are looked for instead
RESOLVE_TIMEOUT_S = 900.0
MAKER = "python -m runner lock"


class LockError(Exception):
    """A lock cannot be made; the message is one line (the resolver's reason where it gave one)."""


@dataclass(frozen=True)
class Target:
    """One lock of an image folder: the `.in` of a flavour and the lock made from it."""

    folder: Path
    flavour: str

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def source(self) -> Path:
        return self.folder / SOURCES[self.flavour]

    @property
    def lock(self) -> Path:
        return self.folder / LOCKS[self.flavour]

    @property
    def excludes(self) -> Path | None:
        path = self.folder / EXCLUDES
        return path if path.is_file() else None

    @property
    def label(self) -> str:
        return f"images/{self.name}/{self.lock.name}"


def targets(names: list[str], images_dir: Path | None = None) -> list[Target]:
    """The locks of the named image folders (every folder with a requirements*.in when none is
    named), each flavour whose `.in` exists; LockError naming a folder that has none."""
    images_dir = images_dir or IMAGES_DIR
    folders = sorted(p for p in images_dir.iterdir() if p.is_dir()) if images_dir.is_dir() else []
    known = [p for p in folders if any((p / s).is_file() for s in SOURCES.values())]
    if not names:
        chosen = known
    else:
        chosen = []
        for name in dict.fromkeys(names):
            folder = image_folder(name, images_dir)
            name = folder.name
            if folder not in known:
                from ..errors import did_you_mean

                what = "has no requirements.in" if folder.is_dir() else "is no image folder"
                raise LockError(f"images/{name} {what}"
                                f"{did_you_mean(name, [p.name for p in known])}")
            chosen.append(folder)
    return [Target(folder, flavour) for folder in chosen for flavour in SOURCES
            if (folder / SOURCES[flavour]).is_file()]


def image_folder(name: str, images_dir: Path) -> Path:
    """The image folder a name or path gives: `numpy`, or a path to a folder of images/
    (`images/numpy`, absolute); LockError for a path elsewhere."""
    path = Path(name)
    if len(path.parts) == 1 and not path.is_absolute():
        return images_dir / name
    if path.expanduser().resolve().parent != images_dir.resolve():
        raise LockError(f"{name}: not a folder of {images_dir} (name an image folder, e.g. "
                        "numpy)")
    return images_dir / path.expanduser().resolve().name


def flags(indexed: bool, excludes: bool) -> list[str]:
    """The resolver's flags for a `.in` that names an extra index (`indexed`) or not, in a
    folder with an excludes.txt or not (see the module's docstring); paths relative to that
    folder, where the resolver runs."""
    out = ["--generate-hashes", "--python-version", LOCK_PYTHON, "--python-platform", PLATFORM]
    if indexed:
        out += ["--index-strategy", "unsafe-best-match"]
    if excludes:
        out += ["--excludes", EXCLUDES]
    return out


def command_line(source_name: str, indexed: bool, excludes: bool) -> str:
    """The command a lock's header names (what `runner lock` runs, paths relative)."""
    return " ".join(["uv pip compile", *flags(indexed, excludes), source_name,
                     "-o", LOCKS[flavour_of(source_name)]])


def flavour_of(source_name: str) -> str:
    return next(f for f, name in SOURCES.items() if name == source_name)


def header(made_by: str, source_name: str, indexed: bool, excludes: bool) -> str:
    """The lock's first lines: what made it, then the exact resolver command (whose
    --python-version `environments.lock_python` reads back)."""
    return (f"# {made_by}; do not edit by hand (the flags: runner/environments/locking.py)\n"
            f"#    {command_line(source_name, indexed, excludes)}\n")


def find_uv() -> str:
    from .venvs import find_uv as found

    uv = found()
    if uv is None:
        raise LockError("uv is missing: pip install uv (the runner's own dependency)")
    return uv


@dataclass(frozen=True)
class Request:
    """What one resolution is asked: the `.in` text (named as its flavour's `.in`), the
    excludes, the lock to prefer, what to upgrade, and the header's first words."""

    text: str
    source_name: str
    made_by: str
    excludes: str | None = None
    prefer: str | None = None             # the text of the lock being replaced
    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()


def compile_lock(request: Request, on_line: Callable[[str], None] = lambda line: None) -> str:
    """The lock text for a request; LockError (the resolver's reason, one line) when it cannot
    be resolved."""
    uv = find_uv()
    lock_name = LOCKS[flavour_of(request.source_name)]
    with tempfile.TemporaryDirectory(prefix="dl-bench-lock-") as tmp:
        folder = Path(tmp)
        source = folder / request.source_name
        source.write_text(request.text, encoding="utf-8")
        # The lock being replaced, without its hashes: uv would keep those it finds there.
        prefer = None if request.prefer is None else lock_entries.without_hashes(request.prefer)
        for name, text in ((lock_name, prefer), (EXCLUDES, request.excludes)):
            if text is not None:
                (folder / name).write_text(text, encoding="utf-8")
        declared = indexes.declared(source)
        command = [uv, "pip", "compile", "--no-header", "--quiet",
                   *flags(bool(declared), request.excludes is not None)]
        extra, notes = reachable_instead(source)
        for note in notes:
            on_line(note)
        command += [*extra, source.name, "-o", lock_name]
        command += ["--upgrade"] if request.upgrade else []
        command += [a for name in request.upgrade_packages for a in ("--upgrade-package", name)]
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=RESOLVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LockError(f"the resolver took over {RESOLVE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            raise LockError(resolver_reason(done.stderr, done.returncode)
                            + (f" ({notes[0]})" if notes else ""))
        body = (folder / lock_name).read_text(encoding="utf-8")
    index_lines = "".join(f"--extra-index-url {url}\n" for url in declared)
    made = header(request.made_by, request.source_name, bool(declared),
                  request.excludes is not None)
    return made + index_lines + ("\n" if index_lines else "") + body


def reachable_instead(source: Path) -> tuple[list[str], list[str]]:
    """Leave the `.in`'s indexes that cannot be reached from here out of the resolution (their
    lines removed from this copy), and look for their files where PIP_FIND_LINKS points:
    (extra resolver arguments, notes)."""
    dropped = {url: why for url in indexes.declared(source) if (why := indexes.unreachable(url))}
    if not dropped:
        return [], []
    kept = [line for line in source.read_text(encoding="utf-8").splitlines(keepends=True)
            if not ((m := indexes.INDEX_LINE.match(line)) and m.group(2) in dropped)]
    source.write_text("".join(kept), encoding="utf-8")
    links = os.environ.get(FIND_LINKS_ENV, "").split()
    where = f"from {FIND_LINKS_ENV} ({' '.join(links)})" if links else \
        f"nowhere else ({FIND_LINKS_ENV} names no wheel folder or mirror)"
    notes = [f"{url} cannot be reached from here ({why}): its files are looked for {where}"
             for url, why in dropped.items()]
    return [a for link in links for a in ("--find-links", link)], notes


def resolver_reason(stderr: str, returncode: int) -> str:
    """uv's error as one line: its message and every cause, without its decoration."""
    parts = []
    for line in stderr.splitlines():
        text = re.sub(r"^[\s×╰─▶│]*(error:|cause:|hint:)?\s*", "", line).strip()
        if text and not text.startswith("warning:"):
            parts.append(text)
    return ": ".join([parts[0], " ".join(parts[1:])]) if len(parts) > 1 else \
        (parts[0] if parts else f"uv exited {returncode}")


# --- the shipped locks ------------------------------------------------------------------------

def request_for(target: Target, upgrade: bool = False,
                upgrade_packages: tuple[str, ...] = ()) -> Request:
    excludes = target.excludes
    return Request(text=target.source.read_text(encoding="utf-8"),
                   source_name=target.source.name, made_by=f"Made by `{MAKER} {target.name}`",
                   excludes=excludes.read_text(encoding="utf-8") if excludes else None,
                   prefer=target.lock.read_text(encoding="utf-8") if target.lock.is_file()
                   else None, upgrade=upgrade, upgrade_packages=upgrade_packages)


def differences(old: str | None, new: str) -> list[str]:
    """What differs between two lock texts (`old` None: no lock yet), in the lock's order: the
    pins (version, extras, URL, marker), the hashes each allows, and the indexes and other
    options (lock_entries.py)."""
    return lock_entries.differences(old, new)


def header_note(old: str | None, new: str) -> str | None:
    """Where a lock's header names another command than the one that makes it now (the pins
    may still match: then the lock is as good, and the next re-lock rewrites the header)."""
    if old is None or command_of(old) == command_of(new):
        return None
    return f"its header names {command_of(old) or 'no command'}; re-locked, it names {command_of(new)}"


def command_of(text: str) -> str | None:
    """The resolver command a lock's header names."""
    found = re.search(r"^#\s+(uv pip compile .*)$", text[:2000], re.M)
    return found.group(1).strip() if found else None


def write_lock(target: Target, text: str) -> None:
    from ..worker.protocol import write_text_atomic

    write_text_atomic(target.lock, text)
