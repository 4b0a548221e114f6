"""What the GPU check leaves in OUT, within what the device tool brings back: the run folders
packed as one archive under the size limit (dropping plots, then logs, to fit), the folder's
own check, atomic writes. Standard library only (check.py's reason)."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from carried_wheels import mib

# What the device tool brings back from OUT: at most 8 files, each at most 16 MiB, named in
# letters, digits, '.', '_' and '-'; the check writes no folders there.
OUT_MAX_FILES = 8
OUT_MAX_FILE_BYTES = 16 * 2**20
OUT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
OUT_FILES = ("summary.txt", "summary.json", "check.log", "pytest.log", "runs.tar.gz")


def _plots(path: Path) -> bool:
    return "plots" in path.parts or path.name == "report.html"


def _traces(path: Path) -> bool:
    """A profile's Chrome trace, and the profiled pass's result in the worker's folder, which
    carries it too (kernels.json and profile.json, the figures, stay)."""
    return _plots(path) or path.name == "trace.json.gz" or (
        "work" in path.parts and path.parent.name.endswith("-profile"))


LEAVE_OUT = (   # what the archive drops, in turn, when it would exceed OUT_MAX_FILE_BYTES
    ("nothing", lambda path: False),
    ("plots and report.html", _plots),
    ("profile traces", _traces),
    ("logs", lambda path: _traces(path) or "logs" in path.parts),
)


def pack_runs(runs: Path, archive: Path, limit: int = OUT_MAX_FILE_BYTES) -> str:
    """The run folders as one .tar.gz under `limit` bytes: whole at first, then without the
    plots and HTML, then without the profiles' traces, then without the workers' logs; says
    what it left out (each step leaves out what the steps before it did)."""
    files = sorted(p for p in runs.rglob("*") if p.is_file() and not p.is_symlink()) \
        if runs.is_dir() else []
    for left_out, leave in LEAVE_OUT:
        partial = archive.with_name(archive.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            for path in files:
                relative = path.relative_to(runs)
                if not leave(relative):
                    tar.add(path, arcname=str(Path("runs") / relative))
        partial.replace(archive)
        if archive.stat().st_size <= limit:
            return left_out
    archive.unlink()
    return "everything: even the records exceed the limit"


def check_out_folder(out: Path) -> list[str]:
    """What the device tool would not bring back from OUT (empty when all of it comes)."""
    problems = []
    entries = sorted(out.iterdir())
    if len(entries) > OUT_MAX_FILES:
        problems.append(f"{len(entries)} entries in {out}, at most {OUT_MAX_FILES}")
    for path in entries:
        if not path.is_file() or path.is_symlink():
            problems.append(f"{path.name}: not a plain file")
        elif path.stat().st_size > OUT_MAX_FILE_BYTES:
            problems.append(f"{path.name}: {mib(path.stat().st_size)}, over "
                            f"{mib(OUT_MAX_FILE_BYTES)}")
        if not OUT_NAME.match(path.name):
            problems.append(f"{path.name!r}: a name with other characters than letters, digits, "
                            "'.', '_', '-'")
    return problems


def atomic_write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
