"""The run's ledger (ledger.jsonl in the run folder): the sha256 of every record as the runner
wrote it, one line per record, appended before the record itself is written. A record whose
bytes are not the ledger's is one a workload (or anything else) changed after the runner wrote
it: `report`, `compare`, `history import` and `--resume` name it and leave it out (a resume sets
it aside and measures its cell again), as they do any record that is not valid.

The ledger is the host's: a worker is never told where it is, and a Docker worker cannot reach
the run folder at all. A local worker runs as the user, with no sandbox (a workload is code):
there the ledger makes a change visible unless the change rewrites the ledger too. A run folder
without a ledger (made before it existed, or with it deleted) is read unverified, and said so."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from .untrusted import read_file

LEDGER = "ledger.jsonl"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Ledger:
    """The ledger of the run folder at `root`: records named by their path in the run folder
    (cells/<key>.json, calibration/<key>.json); the last line of a name is its digest."""

    def __init__(self, root: Path):
        self.path = Path(root) / LEDGER
        self._digests: dict[str, str] | None = None
        self._read = False
        self._held = False

    def hold(self) -> None:
        """The run's own copy, read now (before any worker starts) and kept in this process
        from here on: what a run checks its records against, whatever happens to the file."""
        self.digests()
        self._held = True

    def start(self) -> None:
        """A new run's ledger: empty (a run of this runner has one, however few records), held."""
        self.path.touch()
        self.hold()

    def restore(self) -> bool:
        """The file made what the held copy says again, when something changed it meanwhile
        (True then). A copy not held (a reader's) restores nothing."""
        if not self._held or self._digests is None or self._load() == self._digests:
            return False
        from ...worker.protocol import write_text_atomic

        write_text_atomic(self.path, "".join(
            json.dumps({"record": name, "sha256": value}) + "\n"
            for name, value in self._digests.items()))
        return True

    def note(self, name: str, data: bytes) -> None:
        """Append a record's digest (on disk before the record is: a record is never without
        its line; a line without its record is a write that did not finish)."""
        line = json.dumps({"record": name, "sha256": digest(data)}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        if self._digests is not None:
            self._digests[name] = digest(data)

    def digests(self) -> dict[str, str] | None:
        """name → digest, or None when the run folder has no ledger (read once)."""
        if not self._read:
            self._read, self._digests = True, self._load()
        return self._digests

    def _load(self) -> dict[str, str] | None:
        try:
            text = read_file(self.path).decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        except OSError:
            return {}                   # unreadable: nothing in it vouches for a record
        out: dict[str, str] = {}
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue                # a line cut short by a crash vouches for nothing
            if isinstance(entry, dict) and isinstance(entry.get("record"), str) \
                    and isinstance(entry.get("sha256"), str):
                out[entry["record"]] = entry["sha256"]
        return out

    def adopt(self, files: list[Path], name_of: Callable[[Path], str]) -> int:
        """A run folder made before the ledger existed, resumed: its records are taken as they
        are now (their digests become its ledger), so that the records written next are not
        the only ones it vouches for. How many were taken (0: it had a ledger)."""
        if self.digests() is not None:
            return 0
        self.path.touch()
        self._digests = {}
        for path in files:
            try:
                self.note(name_of(path), read_file(path))
            except OSError:
                continue                    # set aside as unreadable, as before
        return len(self._digests)

    def missing(self) -> str | None:
        """A warning's words when the run folder has no ledger (None when it has one)."""
        if self.digests() is not None:
            return None
        return (f"{self.path}: missing; the run's records are read unverified (a run made "
                "before the ledger, or its ledger deleted)")

    def problem(self, name: str, data: bytes) -> str | None:
        """Why a record's bytes are not the ones the runner wrote (None: they are, or the run
        folder has no ledger to tell)."""
        digests = self.digests()
        if digests is None:
            return None
        if name not in digests:
            return f"not written by this run's runner ({LEDGER} has no digest of it)"
        if digests[name] != digest(data):
            return f"changed since the runner wrote it (its sha256 is not the one {LEDGER} holds)"
        return None
