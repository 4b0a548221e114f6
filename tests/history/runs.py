"""Synthetic run folders for the history tests: copies of the recorded fixture run `base` with
their own run id and date, every sample scaled (a level) and given fresh per-repeat noise, and
optionally the environments' installed distributions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from runner.results.data.records import summarize

from tests.fixtures import FIXTURE_RUNS


def write_run(root: Path, name: str, index: int, level: float = 1.0, noise: float = 0.0,
              seed: int = 0, distributions: dict[str, str] | None = None,
              driver: str | None = None) -> Path:
    """results/<name>/run<index>: fixture base scaled by `level`, each repeat × lognormal(noise)."""
    folder = root / name / f"2026{(index // 28) + 1:02d}{(index % 28) + 1:02d}T000000Z"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "cells").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    manifest = json.loads((FIXTURE_RUNS / "base" / "manifest.json").read_text())
    manifest.update(name=name, run_id=f"{name}/{folder.name}",
                    started_at=f"2026-{(index // 28) + 1:02d}-{(index % 28) + 1:02d}T00:00:00Z")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for source in sorted((FIXTURE_RUNS / "base" / "cells").glob("*.json")):
        record = json.loads(source.read_text())
        record["run_id"] = manifest["run_id"]
        if record["samples_ms"]:
            factor = level * float(np.exp(rng.normal(0.0, noise)))
            record["samples_ms"] = [s * factor for s in record["samples_ms"]]
            record.update(summarize(record["samples_ms"]))
        if distributions is not None and record["status"] != "not_applicable":
            record["distributions"] = distributions
        if driver is not None and record.get("metadata"):
            record["metadata"]["driver_version"] = driver
        (folder / "cells" / source.name).write_text(json.dumps(record))
    return folder
