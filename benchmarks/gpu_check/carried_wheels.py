"""The wheels the GPU check carries to the lent machine (benchmarks/gpu_check/wheels.txt): the
list read and checked against the locks and the runner's own dependencies, the folder checked
against the list's hashes, the download that writes the list, and an install without pip.
Standard library only (check.py's reason)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WHEEL_LIST = HERE / "wheels.txt"


class CheckError(Exception):
    """The check cannot go on; the message is one line."""


def mib(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


# The carried wheels travel with the working tree (64 MiB a call, the repository included).
WHEELS_MAX_BYTES = 40 * 2**20
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                   "manylinux2014_x86_64", "manylinux1_x86_64")

# The runner's own dependencies (pyproject [project] dependencies) that the check does not
# carry because the lent machine has them, or because nothing in the check needs them.
ON_THE_MACHINE = {"rich", "numpy", "scipy", "psutil", "nvidia-ml-py", "matplotlib", "packaging"}
NOT_NEEDED = {"uv": "builds environments from locks; the check builds none (its environments "
                    "name the machine's interpreter)"}
# The lent machine's Python (docs/gpu-check.md): the shipped list's compiled wheels are for it.
MACHINE_PYTHON_TAG = "cp312"
# Carried wheels whose versions must be the shipped CUDA stacks' (so the check measures what a
# user's run installs).
LOCKED_LIKE = REPO / "images" / "torch" / "requirements-cuda.lock"

@dataclasses.dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    sha256: str | None
    filename: str | None
    size: int | None


WHEEL_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;#]+)"
                        r"(?:\s+--hash=sha256:(?P<sha>[0-9a-f]{64}))?"
                        r"(?:\s*#\s*(?P<file>\S+\.whl)\s+(?P<size>\d+)\s+bytes)?\s*$")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_wheel_list(path: Path) -> list[Wheel]:
    """The list's wheels: `name==version --hash=sha256:… # file.whl N bytes` per line."""
    wheels = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = WHEEL_LINE.match(line)
        if not found:
            raise CheckError(f"{path} line {number}: not `name==version --hash=sha256:… "
                             f"# file.whl N bytes`: {line[:80]}")
        size = found["size"]
        wheels.append(Wheel(normalise(found["name"]), found["version"], found["sha"],
                            found["file"], int(size) if size else None))
    names = [w.name for w in wheels]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CheckError(f"{path}: {', '.join(twice)} listed twice (pip stops on two versions)")
    return wheels


def locked_versions(lock: Path) -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9._-]+)==([^\s\\;]+)", lock.read_text(encoding="utf-8"),
                      re.MULTILINE)
    return {normalise(name): version for name, version in pins}


def host_dependencies() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0])
            for dep in project["dependencies"]]


def python_tags(wheels: list[Wheel]) -> set[str]:
    """The CPython tags (cp312, …) of the list's compiled wheels."""
    return {tag for w in wheels for tag in re.findall(r"-(cp3\d+)-", w.filename or "")}


def check_wheel_list(wheels: list[Wheel], python_tag: str = MACHINE_PYTHON_TAG,
                     lock: Path = LOCKED_LIKE) -> list[str]:
    """What is wrong with the list itself (empty when nothing): a wheel without its hash, file
    or size; the runner's dependencies neither carried nor on the machine; a Keras stack other
    than the shipped CUDA lock's; more than WHEELS_MAX_BYTES in all."""
    problems = []
    for wheel in wheels:
        if not (wheel.sha256 and wheel.filename and wheel.size):
            problems.append(f"{wheel.name}=={wheel.version} has no hash, file name or size "
                            "(run `check.py fetch-wheels`)")
        elif not (wheel.filename.endswith("-none-any.whl") or f"-{python_tag}-" in
                  wheel.filename or "abi3" in wheel.filename):
            problems.append(f"{wheel.filename} is not for the list's Python ({python_tag})")
    carried = {w.name for w in wheels}
    for dependency in host_dependencies():
        if dependency not in carried | ON_THE_MACHINE | set(NOT_NEEDED):
            problems.append(f"the runner needs {dependency}: neither carried nor on the machine")
    locked = locked_versions(lock)
    for wheel in wheels:
        if wheel.name in locked and locked[wheel.name] != wheel.version:
            problems.append(f"{wheel.name}=={wheel.version} but {lock.relative_to(REPO)} pins "
                            f"{locked[wheel.name]}: the check would measure another stack")
    total = sum(w.size or 0 for w in wheels)
    if total > WHEELS_MAX_BYTES:
        problems.append(f"the wheels take {mib(total)}, more than {mib(WHEELS_MAX_BYTES)}")
    return problems


def check_wheel_folder(wheels: list[Wheel], folder: Path) -> list[str]:
    """The folder holds exactly the listed files, each with its hash (what pip would install)."""
    problems = []
    present = {p.name: p for p in folder.glob("*.whl")}
    for wheel in wheels:
        path = present.pop(wheel.filename or "", None)
        if path is None:
            problems.append(f"{folder}: {wheel.filename or wheel.name} missing")
        elif sha256(path) != wheel.sha256:
            problems.append(f"{path}: its sha256 is not the list's (a changed or broken file)")
    problems += [f"{folder}: {name} is not in the list (two versions stop pip)"
                 for name in sorted(present)]
    return problems


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_wheels(folder: Path, listing: Path, python_version: str) -> int:
    """Download every listed wheel for the GPU machine's Python (no dependencies: each one is
    named) and write the list back with each file's hash and size."""
    wheels = read_wheel_list(listing)
    folder.mkdir(parents=True, exist_ok=True)
    tags = [arg for platform in WHEEL_PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", python_version, "--implementation", "cp", *tags,
                    "-d", str(folder), *(f"{w.name}=={w.version}" for w in wheels)], check=True)
    files = {}
    for path in folder.glob("*.whl"):
        name, version = path.name.split("-")[:2]
        files[(normalise(name), version)] = path
    lines = [line for line in listing.read_text(encoding="utf-8").splitlines()
             if line.startswith("#") or not line.strip()]
    while lines and not lines[-1].strip():
        lines.pop()
    for wheel in wheels:
        path = files[(wheel.name, wheel.version)]
        lines.append(f"{wheel.name}=={wheel.version} --hash=sha256:{sha256(path)}  "
                     f"# {path.name} {path.stat().st_size} bytes")
    listing.write_text("\n".join(lines) + "\n", encoding="utf-8")
    total = sum(files[(w.name, w.version)].stat().st_size for w in wheels)
    print(f"{len(wheels)} wheels in {folder}, {mib(total)} in all; list: {listing}")
    return 0


def unpack_wheel(path: Path, site_packages: Path) -> None:
    """A wheel's modules into site-packages: its root, and its .data/purelib and platlib."""
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            parts = Path(member.filename).parts
            if ".." in parts or member.is_dir():
                continue
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            target = site_packages.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
