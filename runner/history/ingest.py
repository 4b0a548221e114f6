"""Run folders into the history: one transaction per run, idempotent by run id and content
hash (the manifest and every record file). A run that changed since it was stored (resumed,
re-reported) replaces its earlier rows; an unchanged one is left alone."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Engine

from ..results.analysis.comparability import metadata_value
from ..results.analysis.report_model import RunAnalysis, analyse_run
from ..results.data.store import Store
from ..results.data.types import Manifest, Record
from ..worker.distributions import canonical
from . import measures, tables
from .db import hold_for_writing
from ..timestamps import iso_now

ENV_KEYS = ("lock_sha256", "image_id", "image_digest", "distributions_sha256", "python_version",
            "framework_name", "framework_version", "driver_version", "gpu_name")


@dataclass
class Imported:
    run_id: str
    path: Path
    action: str          # added | updated | unchanged
    cells: int = 0
    # What was not recorded, and why (a record changed since the runner wrote it, one that is
    # not valid), and the warning of a run folder without a ledger: said by whoever imports.
    warnings: tuple[str, ...] = ()


def jsonable(value: Any) -> Any:
    """JSON that every database takes: non-finite floats become null (PostgreSQL's JSON has no
    NaN), anything else unusual its text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def now() -> str:
    return iso_now()


def run_folders(path: Path) -> list[Path]:
    """A run folder, or every run folder below a results folder (oldest first by name)."""
    if (path / "manifest.json").is_file():
        return [path]
    return sorted({p.parent for p in path.glob("**/manifest.json") if (p.parent / "cells").is_dir()})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def content_hash(store: Store, analysed: RunAnalysis) -> dict[str, Any]:
    """sha256 of the manifest and of each record file (the digests of the bytes the analysis
    read: the records are not read again): {"run": …, "records": {key: …}}."""
    per_record = dict(analysed.digests)
    digest = hashlib.sha256(sha256(store.root / "manifest.json").encode())
    for key in sorted(per_record):
        digest.update(f"{key}:{per_record[key]}".encode())
    return {"run": digest.hexdigest(), "records": per_record}


def import_run(engine: Engine, path: Path, origin: str = "import",
               analysed: RunAnalysis | None = None) -> Imported:
    """The run folder at `path` into the history, from its analysis (`analysed`: the one its
    reports were written from; None: an old run's folder, analysed here)."""
    store = Store(path)
    analysed = analysed or analyse_run(store)
    manifest, records = analysed.manifest, analysed.records
    warnings = tuple(f"{path}: {why}; not recorded" for path, why in analysed.unreadable) + \
        tuple(filter(None, [analysed.ledger_warning]))
    hashes = content_hash(store, analysed)
    run_id = manifest.get("run_id") or store.run_id
    with engine.begin() as conn:
        hold_for_writing(conn)          # two imports of one run: the second finds the first's
        earlier = conn.execute(select(tables.runs.c.id, tables.runs.c.content_sha256)
                               .where(tables.runs.c.run_id == run_id)).first()
        if earlier is not None and earlier.content_sha256 == hashes["run"]:
            return Imported(run_id, path, "unchanged", warnings=warnings)
        if earlier is not None:
            conn.execute(delete(tables.runs).where(tables.runs.c.id == earlier.id))
        drivers = [(r.get("metadata") or {}).get("driver_version") for r in records]
        host = {"driver_version": next((d for d in drivers if d), None),
                **{k: v for k, v in (manifest.get("host") or {}).items() if v is not None}}
        run_pk = insert_run(conn, run_id, path, {**manifest, "host": host}, hashes["run"],
                            origin)
        env_pks = insert_environments(conn, run_pk, manifest, records)
        cells = insert_cells(conn, run_pk, env_pks, analysed, hashes["records"])
    return Imported(run_id, path, "updated" if earlier is not None else "added", cells,
                    warnings)


def insert_run(conn: Connection, run_id: str, path: Path, manifest: Manifest,
               digest: str, origin: str) -> int:
    host = manifest.get("host") or {}
    row = {"run_id": run_id, "name": manifest.get("name") or run_id.split("/")[0],
           "content_sha256": digest, "path": str(path.resolve()), "origin": origin,
           "started_at": manifest.get("started_at"), "finished_at": manifest.get("finished_at"),
           "interrupted": manifest.get("interrupted"), "imported_at": now(),
           "host_name": host.get("host_name"), "gpu_name": host.get("gpu_name"),
           "gpu_count": host.get("gpu_count"), "driver_version": host.get("driver_version"),
           "cpu_model": host.get("cpu_model"), "runner_version": manifest.get("runner_version"),
           "executor": manifest.get("executor"), "profile": manifest.get("profile"),
           "flavour": manifest.get("flavour"), "manifest": jsonable(manifest)}
    return _new_key(conn.execute(insert(tables.runs).values(row)))


def stack_of(records: list[Record]) -> tuple[dict[str, Any], dict[str, str]]:
    """An environment's stack as its records saw it (ok records first): metadata and the
    installed distributions (canonical name → version)."""
    measured = [r for r in records if r.get("status") not in ("not_applicable",)]
    ordered = sorted(measured, key=lambda r: r.get("status") != "ok")
    meta: dict[str, Any] = {}
    for record in ordered:
        for key in ENV_KEYS:
            value = (record.get("metadata") or {}).get(key)
            if key not in meta and value is not None:
                meta[key] = str(value)
    dists: dict[str, Any] = next((d for r in ordered if (d := r.get("distributions"))), {})
    return meta, {canonical(name): str(version) for name, version in dists.items()}


def insert_environments(conn: Connection, run_pk: int, manifest: Manifest,
                        records: list[Record]) -> dict[str, int]:
    declared = manifest.get("environments") or {}
    names = list(dict.fromkeys([*declared, *(r["environment"] for r in records)]))
    pks = {}
    for name in names:
        spec = declared.get(name) or {}
        meta, dists = stack_of([r for r in records if r["environment"] == name])
        row = {"run": run_pk, "name": name, "api": spec.get("api"), "backend": spec.get("backend"),
               "image": spec.get("image"), "python": spec.get("python"),
               **{key: meta.get(key, spec.get(key)) for key in ENV_KEYS}}
        pk = _new_key(conn.execute(insert(tables.environments).values(row)))
        if dists:
            conn.execute(insert(tables.distributions),
                         [{"environment": pk, "name": n, "version": v} for n, v in dists.items()])
        pks[name] = pk
    return pks


def insert_cells(conn: Connection, run_pk: int, env_pks: dict[str, int],
                 analysed: RunAnalysis, record_hashes: dict[str, str]) -> int:
    """A row per cell (its summary as the analysis made it, without the answers' verdicts,
    as the history has always kept it) and a row per repeat."""
    manifest, records, summaries = analysed.manifest, analysed.records, analysed.summaries
    for summary in summaries:
        figures = measures.headline(summary)
        rest = {k: v for k, v in summary.items() if k not in figures}
        reps = [r for r in records if r["cell_id"] == summary["cell_id"]]
        row = {"run": run_pk, "environment": env_pks.get(summary["environment"]),
               "cell_id": summary["cell_id"], "cell_name": summary["cell_name"],
               "label": summary["label"], "environment_name": summary["environment"],
               "workload": summary.get("workload"), "task": summary.get("task"),
               "batch_size": summary.get("batch_size"), "status": summary["status"],
               **jsonable({k: figures[k] for k in ("repeats", "repeats_ok", "samples", "median_ms",
                                                   "ci_low_ms", "ci_high_ms", "mean_ms", "cv",
                                                   "repeat_medians_ms", "warnings")}),
               "summary": jsonable(rest), "method_version": method_of(reps, manifest)}
        cell_pk = _new_key(conn.execute(insert(tables.cells).values(row)))
        conn.execute(insert(tables.repeats), [
            {"cell": cell_pk, "repeat": r["repeat"], "status": r["status"],
             "samples": len(r.get("samples_ms") or []), "median_ms": measures.repeat_median(r),
             "record_path": f"cells/{r['cell_id']}-r{r['repeat']}.json",
             "record_sha256": record_hashes[f"{r['cell_id']}-r{r['repeat']}"]}
            for r in reps])
    return len(summaries)


def method_of(records: list[Record], manifest: Manifest) -> str | None:
    """A cell's method version, from its records (one made before method versions: its
    runner_version), else its run's runner_version."""
    found = (metadata_value(r.get("metadata") or {}, "method_version") for r in records)
    return next((str(m) for m in found if m), None) or manifest.get("runner_version")


def _new_key(result: Any) -> int:
    """The primary key of the row an INSERT just made."""
    key = result.inserted_primary_key
    assert key is not None          # an INSERT of one row: SQLAlchemy always knows its key
    return key[0]
