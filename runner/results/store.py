"""The results folder: results/<name>/<timestamp>/ with one atomically written record per cell ×
repeat. A finished record is never overwritten; `--resume` reads them back."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import tomli_w

from ..errors import UsageError
from ..worker.protocol import SCHEMA_VERSION, STATUSES, write_json_atomic, write_text_atomic

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"


class Store:
    def __init__(self, root: Path, records_folder: str = "cells"):
        self.root = root
        self.cells = root / records_folder
        self.logs = root / "logs"
        self.work = root / "work"

    def calibration(self) -> "Store":
        """The same run folder, its calibration records kept apart in calibration/ (they are
        the run's measured peak, never cells of the run)."""
        store = Store(self.root, "calibration")
        store.cells.mkdir(parents=True, exist_ok=True)
        return store

    @classmethod
    def create(cls, name: str, results_dir: Path = RESULTS_DIR) -> "Store":
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        root = results_dir / name / stamp
        suffix = 1
        while root.exists():  # two runs in the same second
            suffix += 1
            root = results_dir / name / f"{stamp}-{suffix}"
        store = cls(root)
        for folder in (store.cells, store.logs, store.work):
            folder.mkdir(parents=True, exist_ok=True)
        return store

    @classmethod
    def open(cls, root: Path) -> "Store":
        if not (root / "manifest.json").is_file():
            raise UsageError(f"{root}: not a run folder (no manifest.json)")
        store = cls(root)
        for folder in (store.cells, store.logs, store.work):
            folder.mkdir(parents=True, exist_ok=True)
        return store

    @staticmethod
    def latest(name: str, results_dir: Path = RESULTS_DIR) -> Path:
        runs = sorted(p for p in (results_dir / name).glob("*") if (p / "manifest.json").is_file())
        if not runs:
            raise UsageError(f"--resume: no earlier run of {name!r} under {results_dir}")
        return runs[-1]

    @property
    def run_id(self) -> str:
        return f"{self.root.parent.name}/{self.root.name}"

    def record_path(self, key: str) -> Path:
        return self.cells / f"{key}.json"

    def log_path(self, key: str) -> Path:
        return self.logs / f"{key}.log"

    def work_dir(self, key: str) -> Path:
        """A fresh scratch folder for one attempt (spec.json, result.json): whatever an
        interrupted earlier attempt left there is discarded."""
        folder = self.work / key
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder

    def write_record(self, key: str, record: dict[str, Any]) -> None:
        path = self.record_path(key)
        if path.exists():
            raise FileExistsError(f"{path} exists: a finished result is never overwritten")
        write_json_atomic(path, record)

    def finished(self) -> set[str]:
        """Keys (cell id + repeat) whose record is complete and well-formed."""
        return {path.stem for path in self._record_files() if self._read(path) is not None}

    def records(self) -> list[dict[str, Any]]:
        out = [self._read(p) for p in self._record_files()]
        return [r for r in out if r is not None]

    def _record_files(self) -> list[Path]:
        # Temporary files of an atomic write in progress start with a dot.
        return sorted(p for p in self.cells.glob("*.json") if not p.name.startswith("."))

    def orphaned_result(self, key: str) -> Path | None:
        """A worker result whose record was never stored (the runner died in between)."""
        path = self.work / key / "result.json"
        return path if path.is_file() and not self.record_path(key).exists() else None

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if record.get("schema") != SCHEMA_VERSION or record.get("status") not in STATUSES:
            return None
        return record

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.root / "manifest.json", manifest)

    def read_manifest(self) -> dict[str, Any]:
        return json.loads((self.root / "manifest.json").read_text(encoding="utf-8"))

    def write_matrix(self, resolved: dict[str, Any]) -> None:
        write_text_atomic(self.root / "matrix.toml", tomli_w.dumps(resolved))

    def write_text(self, name: str, text: str) -> Path:
        target = self.root / name
        write_text_atomic(target, text)
        return target
