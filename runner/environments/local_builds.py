"""Local builds: a pin naming a wheel file or a source checkout of this machine
(`pins = ["keras @ ../keras"]`, relative to the matrix's folder), so that "my patch against the
release" is two environments of one matrix.

Each is locked by its content, never by where it lies or when it was touched:
- a wheel file by its sha256;
- a source tree by the hash of the files it is made of, path and bytes (and whether each is
  executable): in a git checkout the files git would commit — tracked and untracked, ignored
  ones left out — so an uncommitted change (a dirty tree) moves the hash and a `touch` does
  not; elsewhere every file; in both, build output and caches left out (SKIPPED).
The file is copied (a tree built into a wheel: `uv build --wheel` of a copy of exactly the
files hashed) into a folder of the stack cache named by that hash, and the derived lock pins `name @ file:///…` there with the
wheel's own sha256, as every other file of a lock is pinned. A tree is built once per content:
the same tree again finds its wheel; an edited one makes another."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from .channels import Build
from .venvs import find_uv, sha256_file

BUILD_TIMEOUT_S = 1800.0
WHEELS = "wheels"               # the stack cache's wheels/<hash>/: one local build each
# Folders of a tree that is not a git checkout that are no part of its source.
SKIPPED = {".git", "__pycache__", ".venv", "venv", ".tox", ".nox", "build", "dist",
           ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}


class LocalBuildError(Exception):
    """A local pin cannot be built or read; the message is one line."""


def git(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True,
                          stdin=subprocess.DEVNULL)


def skipped(folders: tuple[str, ...]) -> bool:
    """A path under build output or a cache (SKIPPED, *.egg-info): no part of the source."""
    return any(f in SKIPPED or f.endswith(".egg-info") for f in folders)


def tree_files(tree: Path) -> tuple[list[str], str]:
    """The files a tree is made of (paths relative to it, sorted) and what git says of it
    ("git 0123abcd + 2 changed files"; "" outside a git checkout)."""
    listed = git(tree, "ls-files", "-z", "--cached", "--others", "--exclude-standard") \
        if shutil.which("git") else None
    if listed is not None and listed.returncode == 0:
        files = sorted({f for f in listed.stdout.decode().split("\0")
                        if f and ((tree / f).is_file() or (tree / f).is_symlink())
                        and not skipped(Path(f).parts[:-1])})
        head = git(tree, "rev-parse", "--short=8", "HEAD").stdout.decode().strip()
        status = git(tree, "status", "--porcelain", "--", ".").stdout.decode().splitlines()
        dirty = f" + {len(status)} changed file{'s' if len(status) != 1 else ''}" if status \
            else ""
        return files, f"git {head or 'without commits'}{dirty}"
    files = []
    for folder, dirs, names in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not skipped((d,)))
        files += [os.path.relpath(os.path.join(folder, n), tree) for n in names]
    return sorted(files), ""


def tree_sha256(tree: Path) -> tuple[str, str, list[str]]:
    """(the tree's content hash, what git says of it, the files it covers)."""
    files, said = tree_files(tree)
    digest = hashlib.sha256()
    for name in files:
        path = tree / name
        if path.is_symlink():
            content = b"link:" + os.readlink(path).encode()
        else:
            content = hashlib.sha256(path.read_bytes()).hexdigest().encode()
        mode = b"x" if os.access(path, os.X_OK) and not path.is_symlink() else b"-"
        digest.update(name.encode() + b"\0" + mode + content + b"\n")
    return digest.hexdigest(), said, files


def wheel_version(name: str, wheel: Path) -> str:
    """The wheel's version; LocalBuildError when it is no wheel of `name`."""
    try:
        found, version, _, _ = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        raise LocalBuildError(f"{wheel.name} is no wheel file ({exc})") from None
    if found != canonicalize_name(name):
        raise LocalBuildError(f"{wheel.name} is a wheel of {found}, not of {name}")
    return str(version)


def build_wheel(tree: Path, files: list[str], out: Path) -> Path:
    """`uv build --wheel` of a copy of exactly the files the tree's hash covers (nothing the
    hash did not see goes into the wheel, and the checkout gets no build output) into `out`;
    the wheel it made."""
    uv = find_uv()
    if uv is None:
        raise LocalBuildError("building a source tree needs uv (pip install uv)")
    with tempfile.TemporaryDirectory(prefix="dl-bench-wheel-") as tmp:
        source = Path(tmp) / "source"
        for name in files:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(tree / name, source / name, follow_symlinks=False)
        try:
            done = subprocess.run([uv, "build", "--wheel", "--quiet", "--out-dir",
                                   str(Path(tmp) / "dist"), str(source)], capture_output=True,
                                  text=True, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LocalBuildError(f"building it took over {BUILD_TIMEOUT_S:.0f} s") from None
        wheels = sorted((Path(tmp) / "dist").glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
            raise LocalBuildError("uv build failed: " + (" ".join(lines[-3:])[:400]
                                                         or f"exit {done.returncode}"))
        out.mkdir(parents=True, exist_ok=True)
        target = out / wheels[0].name
        shutil.copyfile(wheels[0], target.with_suffix(".part"))
        os.replace(target.with_suffix(".part"), target)
    return target


def build(name: str, where: str, base: Path, cache: Path) -> tuple[Build, Path]:
    """The local wheel or tree a pin names (`where`, relative to `base`), copied or built into
    the cache under its content hash: (its Build, the wheel)."""
    path = (base / Path(where.removeprefix("file://")).expanduser()).resolve()
    if path.is_file():
        sha = sha256_file(path)
        home = cache / WHEELS / f"file-{sha[:16]}"
        wheel = home / path.name
        version = wheel_version(name, path)
        if not wheel.is_file():
            home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, wheel.with_suffix(".part"))
            os.replace(wheel.with_suffix(".part"), wheel)
        return Build(canonicalize_name(name), name, version, "local wheel", sha256=sha), wheel
    if not path.is_dir():
        raise LocalBuildError(f"{where}: no such wheel file or source folder")
    sha, said, files = tree_sha256(path)
    home = cache / WHEELS / f"tree-{sha[:16]}"
    found = sorted(home.glob("*.whl")) if home.is_dir() else []
    wheel = found[0] if found else build_wheel(path, files, home)
    version = wheel_version(name, wheel)
    return Build(canonicalize_name(name), name, version, "local tree", sha256=sha,
                 detail=said), wheel
