"""The run's ledger (ledger.jsonl in the run folder): the sha256 of every file the runner wrote
that a report reads — records (cells/, calibration/) and profiles (profiles/) — one line per file,
appended before the file itself is written. A file whose bytes are not the ledger's is one a
workload (or anything else) changed after the runner wrote it: `report`, `compare`, `history
import` and `--resume` name it and leave it out (a resume sets it aside and measures its cell
again), as they do any record that is not valid.

One Ledger object per run folder: every writer of a run (its cells, its calibration, its
profiled passes) notes through the same object, whose copy the run holds from its start. The
manifest says which folders the ledger vouches for ("ledger" in manifest.json), so a run that
kept one and lost it reads as *deleted*, not as a run made before the ledger.

A name has one digest. A second line for it is the runner's only after a line that retires the
first ({"record": name, "retired": why}: set aside by a resume, a write that never finished, a
profile made again); a second digest without one is refused. The ledger is the host's: a worker
is never told where it is, and a Docker worker cannot reach the run folder at all. A local worker
runs as the user, with no sandbox (a workload is code): there the ledger makes a change visible
unless the change rewrites the ledger too."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .untrusted import describe_os_error, read_file

LEDGER = "ledger.jsonl"
# What the ledger of a run of this runner vouches for (the manifest's "ledger" says so); a run
# made before the manifest said it kept cells/ only.
COVERS = ("cells", "calibration", "profiles")
OLD_COVERS = ("cells",)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def declaration() -> dict[str, Any]:
    """The manifest's "ledger": where the run keeps it and what it vouches for."""
    return {"file": LEDGER, "covers": list(COVERS)}


@dataclass
class Lines:
    """A ledger's text as read: name → its digest, and the names given a second digest that no
    retiring line came before."""

    text: str = ""
    digests: dict[str, str] = field(default_factory=dict)
    doubled: set[str] = field(default_factory=set)

    def add(self, line: str) -> None:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            return                          # a line cut short by a crash vouches for nothing
        if not isinstance(entry, dict) or not isinstance(entry.get("record"), str):
            return
        name = entry["record"]
        if isinstance(entry.get("retired"), str):
            self.digests.pop(name, None)
            self.doubled.discard(name)
        elif isinstance(entry.get("sha256"), str):
            if name in self.digests:
                self.doubled.add(name)
            else:
                self.digests[name] = entry["sha256"]

    @classmethod
    def parse(cls, text: str) -> Lines:
        lines = cls(text)
        for line in text.splitlines():
            lines.add(line)
        return lines


class Ledger:
    """The ledger of the run folder at `root`: files named by their path in the run folder
    (cells/<key>.json, calibration/<key>.json, profiles/<cell>/profile.json, …)."""

    def __init__(self, root: Path):
        self.path = Path(root) / LEDGER
        self._lines: Lines | None = None          # None: no ledger file
        self._unreadable: str | None = None       # why the file could not be read
        self._read = False
        self._held = False
        self._covers: tuple[str, ...] | None = None
        self._declared: bool | None = None
        self._lock = threading.Lock()             # parallel lanes note from their threads
        # Each file's sha256 as problem() was given its bytes: what a run's history keys its
        # records by (history/ingest.py), so that they are not read a second time for it.
        self.seen: dict[str, str] = {}

    # --- the run's own copy ------------------------------------------------------------------

    def hold(self) -> None:
        """The run's own copy, read now (before any worker starts) and kept in this process
        from here on: what a run checks its files against, whatever happens to the file."""
        self._load()
        self._held = True

    def start(self) -> None:
        """A new run's ledger: empty (a run of this runner has one, however few records), held,
        vouching for every folder the manifest's declaration() names."""
        self.path.touch()
        self._covers, self._declared = COVERS, True
        self.hold()

    def restore(self) -> bool:
        """The file made what the held copy says again, line for line, when something changed
        it meanwhile (True then). A copy not held (a reader's) restores nothing."""
        if not self._held or self._lines is None:
            return False
        try:
            now = read_file(self.path).decode("utf-8", "replace")
        except OSError:
            now = None
        if now == self._lines.text:
            return False
        from ...worker.protocol import write_text_atomic

        write_text_atomic(self.path, self._lines.text)
        return True

    def note(self, name: str, data: bytes, replacing: str | None = None) -> None:
        """Append a file's digest (on disk before the file is: a file is never without its
        line; a line without its file is a write that did not finish). A name that has a digest
        already is retired first, `replacing` saying why; without it, refused."""
        if replacing is not None:
            self.retire(name, replacing)
        self._append({"record": name, "sha256": digest(data)}, name, replaces=False)

    def retire(self, name: str, why: str) -> None:
        """The name's digest no longer stands (its file set aside, never written, or made
        again): the next note of the name is its one digest. Nothing to retire: no line."""
        if self.has(name):
            self._append({"record": name, "retired": why}, name, replaces=True)

    def has(self, name: str) -> bool:
        lines = self._load()
        return lines is not None and name in lines.digests

    def _append(self, entry: dict[str, Any], name: str, replaces: bool) -> None:
        with self._lock:
            lines = self._load()
            if not replaces and lines is not None and name in lines.digests:
                raise FileExistsError(f"{name}: {LEDGER} holds a digest of it already")
            line = json.dumps(entry) + "\n"
            if lines is not None and lines.text and not lines.text.endswith("\n"):
                line = "\n" + line              # after a line a crash cut short
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            if lines is None:
                lines = self._lines = Lines()
            lines.text += line
            lines.add(line)

    # --- reading ------------------------------------------------------------------------------

    def _load(self) -> Lines | None:
        """The ledger's lines (read once), or None when there is no ledger or it is unreadable."""
        if not self._read:
            self._read = True
            try:
                self._lines = Lines.parse(read_file(self.path).decode("utf-8", "replace"))
            except FileNotFoundError:
                self._lines = None
            except OSError as exc:
                self._lines, self._unreadable = None, describe_os_error(exc)
        return self._lines

    def _declaration(self) -> tuple[bool, tuple[str, ...]]:
        """(whether the manifest says the run keeps a ledger, the folders it vouches for)."""
        if self._covers is None:
            declared: Any = None
            try:
                declared = json.loads(read_file(self.path.parent / "manifest.json")).get("ledger")
            except (OSError, ValueError, RecursionError, AttributeError):
                pass
            covers = declared.get("covers") if isinstance(declared, dict) else None
            self._declared = isinstance(declared, dict)
            self._covers = tuple(c for c in covers if isinstance(c, str)) \
                if isinstance(covers, list) else OLD_COVERS
        return bool(self._declared), self._covers

    def digests(self) -> dict[str, str] | None:
        """name → digest, or None when the run folder has no readable ledger."""
        lines = self._load()
        return None if lines is None else dict(lines.digests)

    def fault(self) -> str | None:
        """What is wrong with the ledger, in a few words: unreadable, deleted (the manifest says
        the run keeps one) or missing (a run made before the ledger); None when there is none."""
        if self._load() is not None:
            return None
        if self._unreadable is not None:
            return f"unreadable ({self._unreadable})"
        if self._declaration()[0]:
            return "deleted (manifest.json says the run keeps one)"
        return "missing (a run made before the ledger)"

    def warning(self) -> str | None:
        """A warning's words when the ledger cannot vouch for the run's files (None: it can)."""
        fault = self.fault()
        return None if fault is None else \
            f"{self.path}: {fault}; the run's records are read unverified"

    def unusable(self) -> str | None:
        """Why no run may write into the folder: its ledger deleted or unreadable, so the
        records it vouched for cannot be told from others (None: a writer may go on; a run
        made before the ledger is adopted instead)."""
        fault = self.fault()
        if fault is None or fault.startswith("missing"):
            return None
        return f"{self.path}: {fault}, so the run's records cannot be verified"

    def adopt(self, files: list[Path], name_of: Callable[[Path], str]) -> int:
        """A run folder made before the ledger existed, resumed: its records are taken as they
        are now (their digests become its ledger), so that the records written next are not
        the only ones it vouches for. How many were taken (0: it had a ledger)."""
        if self._load() is not None or self.unusable():
            return 0
        self.path.touch()
        self._lines = Lines()
        for path in files:
            try:
                self.note(name_of(path), read_file(path))
            except OSError:
                continue                    # set aside as unreadable, as before
        return len(self._lines.digests)

    def problem(self, name: str, data: bytes) -> str | None:
        """Why a file's bytes are not the ones the runner wrote (None: they are, or the ledger
        cannot tell: see warning(), or it does not vouch for the file's folder)."""
        found = self.seen[name] = digest(data)
        lines = self._load()
        if lines is None or name.partition("/")[0] not in self._declaration()[1]:
            return None
        if name in lines.doubled:
            return f"{LEDGER} holds a second digest of it, the first never set aside"
        if name not in lines.digests:
            return f"not written by this run's runner ({LEDGER} has no digest of it)"
        if lines.digests[name] != found:
            return f"changed since the runner wrote it (its sha256 is not the one {LEDGER} holds)"
        return None
