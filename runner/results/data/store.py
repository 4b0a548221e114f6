"""The results folder: results/<name>/<timestamp>/ with one atomically written record per cell ×
repeat. A finished record is never overwritten; `--resume` reads them back.

A run folder is untrusted input (it travels between machines): it is created exclusively and
locked for the run's life, its records and manifest are validated as data (results/data/schemas.py),
and no symbolic link in it is followed on read or write.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
from pathlib import Path
from typing import Any, cast

import tomli_w

from ...errors import UsageError
from ...paths import RESULTS_DIR, folder_in_run
from ...worker.protocol import json_text, write_json_atomic, write_text_atomic
from . import schemas
from .ledger import Ledger
from .types import Manifest, Record
from .untrusted import MAX_FILE_BYTES, describe_os_error, read_file
from ...timestamps import folder_stamp

__all__ = ["MAX_FILE_BYTES", "SET_ASIDE", "Store", "describe_os_error", "open_run", "read_file",
           "results_root"]

LOCK_FILE = ".lock"
# Room kept free in a run folder for the run's life and given back when it stops, so that a run
# stopped by a full disk can still finalise its manifest and reports.
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 8 << 20
SET_ASIDE = "set-aside"          # unreadable records moved out of cells/ by a resume
_STAMP = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)(?:-(?P<n>\d+))?$")


def results_root(path: Path, option: str = "--results-dir") -> Path:
    """The folder of run folders, resolved once (workers start in folders of their own, so a
    relative path would point elsewhere for them)."""
    path = Path(path).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is a file, not a folder")
    return path


class Store:
    def __init__(self, root: Path, records_folder: str = "cells"):
        self.root = Path(root)
        self.cells = self.root / records_folder
        self.logs = self.root / "logs"
        self.work = self.root / "work"
        self.ledger = Ledger(self.root)
        self._lock_fd: int | None = None
        self._reserved = False

    def calibration(self, create: bool = True) -> Store:
        """The same run folder, its calibration records kept apart in calibration/ (they are
        the run's measured peak, never cells of the run): its one ledger shared, so that what
        the calibration notes is in the run's held copy too."""
        store = Store(self.root, "calibration")
        store.ledger = self.ledger
        if create:
            store._make_folders()
        return store

    # --- creating and opening ---------------------------------------------------------------

    @classmethod
    def create(cls, name: str, results_dir: Path = RESULTS_DIR) -> Store:
        """A new run folder, made exclusively (two runs started in the same second get two
        folders) and locked."""
        parent = results_root(results_dir) / name
        made = [p for p in (parent, *parent.parents) if not p.exists()]
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UsageError(f"{parent}: is a file, not a folder") from None
        stamp = folder_stamp()
        for suffix in range(1, 10_000):
            root = parent / (stamp if suffix == 1 else f"{stamp}-{suffix}")
            try:
                root.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise UsageError(f"{parent}: no free run folder name for {stamp}")
        store = cls(root)
        try:
            store.lock()
            store._make_folders()
            store.ledger.start()
            return store.reserve()
        except (OSError, UsageError):       # a disk too full for the reserve: leave nothing
            store.close()
            shutil.rmtree(root, ignore_errors=True)
            for folder in made:             # innermost first; only those made, only empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    @classmethod
    def open(cls, root: Path, lock: bool = True, create_folders: bool = True) -> Store:
        """An existing run folder: checked (a manifest, no symbolic links at its top), locked
        for a run (`lock`), its folders made for a writer (`create_folders`)."""
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise UsageError(f"{root}: no such run folder")
        store = cls(root)
        store.check_links()
        if not (root / "manifest.json").is_file():
            raise UsageError(f"{root}: not a run folder (no manifest.json)")
        if lock:
            store.lock()
            store.ledger.hold()
            unusable = store.ledger.unusable()
            if unusable:
                store.close()
                raise UsageError(f"{unusable}; nothing more is written into the run (`report` "
                                 "still reads it, unverified): start a new run")
            store.reserve()
        if create_folders:
            store._make_folders()
        return store

    def check_links(self) -> None:
        """A run folder holds no symbolic links at its top or in its folders: a link there
        could make a read take a file of the host, or a write land outside the run."""
        for entry in self.root.iterdir():
            if entry.is_symlink():
                raise UsageError(f"{entry}: is a symbolic link; a run folder holds none "
                                 f"(it could point anywhere)")

    def _make_folders(self) -> None:
        for folder in (self.cells, self.logs, self.work):
            folder_in_run(self.root, folder.name)

    def lock(self) -> None:
        """Hold the run folder for this process's life (flock: the kernel releases it when the
        process ends, however it ends); a second run or resume of it refuses in one line."""
        path = self.root / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UsageError(f"{path}: cannot lock the run folder: {describe_os_error(exc)}") \
                from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise UsageError(f"{self.root}: in use by another run (pid {holder}); one run at a "
                             f"time per run folder") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def reserve(self) -> Store:
        """Set RESERVE_BYTES of the disk aside (allocated, not just sized)."""
        fd = os.open(self.root / RESERVE_FILE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError as exc:
            os.close(fd)
            (self.root / RESERVE_FILE).unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise UsageError(f"{self.root}: cannot set {RESERVE_BYTES >> 20} MB aside for "
                                 f"the run's own files: {exc.strerror}") from None
            return self          # a file system that cannot allocate ahead: no reserve
        os.close(fd)
        self._reserved = True
        return self

    def release_reserve(self) -> None:
        """Give the reserved room back (before the manifest and reports are written last)."""
        if self._reserved:
            (self.root / RESERVE_FILE).unlink(missing_ok=True)
            self._reserved = False

    def close(self) -> None:
        self.release_reserve()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @staticmethod
    def latest(name: str, results_dir: Path = RESULTS_DIR) -> Path:
        """The newest run folder of `name`: by its timestamp, then its same-second number
        (…-10 after …-9)."""
        def order(path: Path) -> tuple[str, int, str]:
            match = _STAMP.match(path.name)
            if match is None:
                return "", 0, path.name
            return match["stamp"], int(match["n"] or 1), path.name

        folder = results_root(results_dir) / name
        runs = sorted((p for p in folder.glob("*") if (p / "manifest.json").is_file()), key=order)
        if not runs:
            raise UsageError(f"--resume: no earlier run of {name!r} under {folder.parent}")
        return runs[-1]

    @property
    def run_id(self) -> str:
        return f"{self.root.parent.name}/{self.root.name}"

    # --- records ------------------------------------------------------------------------------

    def record_path(self, key: str) -> Path:
        return self.cells / f"{key}.json"

    def log_path(self, key: str) -> Path:
        return self.logs / f"{key}.log"

    def work_dir(self, key: str) -> Path:
        """A fresh scratch folder for one attempt (spec.json, result.json): whatever an
        interrupted earlier attempt left there is discarded (a link is removed, not followed)."""
        folder = self.work / key
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder

    def write_record(self, key: str, record: Record) -> None:  # its digest in the ledger first
        path = self.record_path(key)
        if path.exists() or path.is_symlink():
            raise FileExistsError(f"{path} exists: a finished result is never overwritten")
        text = json_text(record)
        self.ledger.note(self.ledger_name(path), text.encode("utf-8"),
                         replacing="never written (the write did not finish)")
        write_text_atomic(path, text)

    def ledger_name(self, path: Path) -> str:
        return f"{self.cells.name}/{path.name}"

    def adopt_unledgered(self) -> int:
        """Resuming a run made before the ledger: Ledger.adopt of its records."""
        return self.ledger.adopt(self._record_files(), self.ledger_name)

    def read_record(self, path: Path, listed: set[Any] | None = None
                    ) -> tuple[Record | None, str | None]:
        """(record, None) when the file holds a valid record of its own cell (one of `listed`,
        where given), the bytes the runner wrote (its ledger); else (None, why)."""
        try:
            raw = read_file(path)
            data = schemas.parse_json(raw)
        except OSError as exc:
            return None, describe_os_error(exc)
        except ValueError as exc:
            return None, f"not valid JSON ({exc})"
        problem = schemas.record_problem(data, path.stem)
        if problem is None and listed is not None and data["cell_id"] not in listed:
            problem = (f"cell {data['cell_id']!r} is not a cell of this run (manifest.json "
                       "does not list it)")
        problem = problem or self.ledger.problem(self.ledger_name(path), raw)
        return (None, problem) if problem else (schemas.complete_record(data), None)

    def read_records(self, manifest: Manifest | None = None
                     ) -> tuple[list[Record], list[tuple[Path, str]]]:
        """(valid records, [(file, why) for every file that is not one]). With the run's
        `manifest`, a record of a cell it does not list is not one of the run's either."""
        listed = None if manifest is None else {c.get("id") for c in manifest.get("cells", [])}
        good: list[Record] = []
        bad: list[tuple[Path, str]] = []
        for path in self._record_files():
            record, problem = self.read_record(path, listed)
            if record is None:
                bad.append((path, problem or "not a record"))
            else:
                good.append(record)
        return good, bad

    def records(self, manifest: Manifest | None = None) -> list[Record]:
        return self.read_records(manifest)[0]

    def finished(self) -> set[str]:
        """Keys (cell id + repeat) whose record is complete and valid."""
        return {f"{r['cell_id']}-r{r['repeat']}" for r in self.records()}

    def set_aside_unreadable(self) -> list[tuple[Path, str]]:
        """Move every record that cannot be used out of cells/ (to set-aside/), so that its cell
        runs again and its new record can be written: [(where it went, why)]."""
        moved = []
        for path, problem in self.read_records()[1]:
            folder = folder_in_run(self.root, SET_ASIDE)
            target = folder / path.name
            number = 1
            while target.exists() or target.is_symlink():
                number += 1
                target = folder / f"{path.stem}.{number}{path.suffix}"
            os.replace(path, target)          # a link is moved as a link, never followed
            self.ledger.retire(self.ledger_name(path), f"set aside to {SET_ASIDE}/{target.name}")
            moved.append((target, problem))
        return moved

    def _record_files(self) -> list[Path]:
        # Temporary files of an atomic write in progress start with a dot.
        return sorted(p for p in self.cells.glob("*.json") if not p.name.startswith("."))

    def orphaned_result(self, key: str) -> Path | None:
        """A worker result whose record was never stored (the runner died in between)."""
        path = self.work / key / "result.json"
        return path if path.is_file() and not path.is_symlink() \
            and not self.record_path(key).exists() else None

    # --- manifest, matrix, reports ---------------------------------------------------------

    def write_manifest(self, manifest: Manifest) -> None:
        write_json_atomic(self.root / "manifest.json", manifest)

    def read_manifest(self) -> Manifest:
        """The manifest, validated; UsageError naming the file and the problem."""
        path = self.root / "manifest.json"
        try:
            data = schemas.parse_json(read_file(path))
        except OSError as exc:
            raise UsageError(f"{path}: {describe_os_error(exc)}") from None
        except ValueError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc})") from None
        problem = schemas.manifest_problem(data)
        if problem:
            raise UsageError(f"{path}: {problem}")
        return cast(Manifest, data)

    def write_matrix(self, resolved: dict[str, Any]) -> None:
        write_text_atomic(self.root / "matrix.toml", tomli_w.dumps(resolved))

    def write_text(self, name: str, text: str) -> Path:
        target = self.root / name
        write_text_atomic(target, text)
        return target


def open_run(path: Path) -> tuple[Store, Manifest]:
    """A run folder's store and manifest, read only (nothing is created in either run)."""
    if not path.is_dir():
        raise UsageError(f"{path}: no such run folder")
    if not (path / "manifest.json").is_file() or not (path / "cells").is_dir():
        raise UsageError(f"{path}: not a run folder (needs manifest.json and cells/)")
    store = Store.open(path, lock=False, create_folders=False)
    return store, store.read_manifest()
