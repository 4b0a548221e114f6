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
              driver: str | None = None, method: str | None = None,
              runner: str | None = None) -> Path:
    """results/<name>/run<index>: fixture base scaled by `level`, each repeat × lognormal(noise);
    `method` the records' method version, `runner` the manifest's and records' runner version."""
    folder = root / name / f"2026{(index // 28) + 1:02d}{(index % 28) + 1:02d}T000000Z"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "cells").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    manifest = json.loads((FIXTURE_RUNS / "base" / "manifest.json").read_text())
    manifest.update(name=name, run_id=f"{name}/{folder.name}",
                    started_at=f"2026-{(index // 28) + 1:02d}-{(index % 28) + 1:02d}T00:00:00Z")
    if runner is not None:
        manifest["runner_version"] = runner
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
        if record.get("metadata"):
            record["metadata"].update({k: v for k, v in (("method_version", method),
                                                          ("runner_version", runner)) if v})
        (folder / "cells" / source.name).write_text(json.dumps(record))
    return folder


def old_run(pk: int, run_id: str, runner_version: str | None = None) -> dict:
    """A runs row as every revision so far knows it (the columns revision 0001 made)."""
    return {"id": pk, "run_id": run_id, "name": run_id.split("/")[0], "content_sha256": "0" * 64,
            "origin": "import", "started_at": f"2026-01-{pk:02d}T00:00:00Z",
            "imported_at": "2026-03-01T00:00:00Z", "runner_version": runner_version}


def old_cell(pk: int, run: int, median_ms: float, name: str = "cnn-fit-keras-jax-b128") -> dict:
    """A cells row as revisions 0001 and 0002 know it (no method version)."""
    return {"id": pk, "run": run, "cell_id": "f2cnnkrjax", "cell_name": name,
            "label": "cnn (fit)", "environment_name": "keras-jax", "status": "ok",
            "batch_size": 128, "median_ms": median_ms, "repeat_medians_ms": [median_ms]}


def insert_rows(engine, **rows: list[dict]) -> None:
    """Rows into the tables as the database's own revision has them (reflected, not
    runner/history/tables.py's): a database made by an older runner."""
    from sqlalchemy import MetaData

    found = MetaData()
    found.reflect(engine)
    with engine.begin() as conn:
        for table, values in rows.items():
            conn.execute(found.tables[table].insert(), values)
