"""The machine profile's cache of calibrated peaks: a calibration record ([run] calibrate) kept
per machine (host and GPU model, the machine profile's key) and per environment (the hash of
the lock it was built from, or the image reference), so that the next run on the same VM with
the same stacks reuses it instead of calibrating again (`--recalibrate` measures anew). A
changed lock is another environment: its peak is measured again. An environment without a lock
(an existing interpreter, whose packages can change under it) is never cached.

results/machine-profiles/<host>-<gpu>-peaks.json: {schema, host, gpu_name, peaks: {"<lock>|<cell
id>": {record, run_id, cached_at}}}, written atomically."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ..worker.protocol import write_json_atomic
from . import profile
from ..timestamps import iso_now

SCHEMA = 1
SUFFIX = "-peaks.json"


class PeakCache:
    def __init__(self, results_dir: Path, host: str | None = None, gpu_name: str | None = None):
        if host is None:
            host, gpu_name = profile.this_machine()
        self.host, self.gpu_name = host, gpu_name
        self.path = results_dir / profile.PROFILES_DIR / \
            f"{profile.profile_key(host, gpu_name)}{SUFFIX}"
        self._data: dict[str, Any] | None = None

    def data(self) -> dict[str, Any]:
        if self._data is None:
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = None
            ok = isinstance(loaded, dict) and loaded.get("schema") == SCHEMA and \
                isinstance(loaded.get("peaks"), dict)
            self._data = loaded if ok else {"schema": SCHEMA, "host": self.host,
                                            "gpu_name": self.gpu_name, "peaks": {}}
        return self._data

    @staticmethod
    def key(environment: str, cell_id: str) -> str:
        return f"{environment}|{cell_id}"

    def get(self, environment: str | None, cell_id: str) -> dict[str, Any] | None:
        """The cached record of this calibration cell in this environment, or None."""
        if environment is None:
            return None
        entry = self.data()["peaks"].get(self.key(environment, cell_id))
        record = entry.get("record") if isinstance(entry, dict) else None
        if not isinstance(record, dict) or record.get("status") != "ok":
            return None
        return {**copy.deepcopy(entry), "record": copy.deepcopy(record)}

    def last_wall_s(self, cell_id: str) -> float | None:
        """How long this calibration cell's process took here last, in any environment."""
        walls = [e["record"].get("wall_s") for k, e in self.data()["peaks"].items()
                 if k.endswith(f"|{cell_id}") and isinstance(e, dict)
                 and isinstance(e.get("record"), dict)]
        walls = [w for w in walls if isinstance(w, (int, float))]
        return float(walls[-1]) if walls else None

    def put(self, environment: str | None, cell_id: str, record: dict[str, Any],
            run_id: str) -> None:
        """Keep an ok calibration record (a failed one is never cached)."""
        if environment is None or record.get("status") != "ok":
            return
        self.data()["peaks"][self.key(environment, cell_id)] = {
            "record": record, "run_id": run_id,
            "cached_at": iso_now()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.data())
