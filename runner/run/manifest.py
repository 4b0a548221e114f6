"""A run's manifest (manifest.json of its folder), laid out in this one place: what ran, where,
with which decisions and why, and how the run ended. Built once, when the run folder is made
(opening_manifest), then updated as the run goes — the environments once prepared, the
calibration, each resume, the cost, the ending — never rebuilt, so that what it recorded at the
start (when, where, which decisions) stays what the run was. Read back as data by
results/data/schemas.py's ManifestModel, typed by results/data/types.py's Manifest: results/
never imports the run that writes it."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from ..environments import Flavour
from ..environments.stacks import Stack
from ..errors import one_line
from ..executors.base import Prepared
from ..machine import hostinfo, profile as machine_profile
from ..machine.hostinfo import Gpu
from ..results.data import ledger
from ..results.data.store import Store
from ..results.data.types import Manifest, ManifestCell
from ..schema import EnvironmentSpec
from ..schema.matrix import Matrix
from ..timestamps import iso_now
from ..version import runner_version
from . import resume
from .block_sizes import HandedBlocks
from .plan import Plan
from .setup import Setup

SCHEMA = 1


def now() -> str:
    return iso_now()


def environment_entry(env: EnvironmentSpec, executor: str, flavour: str | None, uses: str,
                      prepared: Prepared | None, stack: Stack | None = None) -> dict[str, Any]:
    """An environment as the matrix declares it, the executor, flavour and lock, image or
    interpreter it uses, its derived stack (the lock the run folder keeps, what moved against
    the folder's lock), and (once prepared) the facts its preparation found."""
    declared = env.model_dump(exclude=None if env.derived else {"pins", "packages"})
    entry = {**declared, "executor": executor, "flavour": flavour, "uses": uses}
    if stack is not None:
        # The lock itself: the run folder's stacks/<environment>/ (stacks.run_folder_lock).
        entry["stack"] = {"derives": f"images/{stack.folder}", "changes": list(stack.changes),
                          "flavour": stack.flavour, "lock_sha256": stack.sha256,
                          "moved": stack.moved(), "builds": stack_builds(stack)}
    if prepared is not None:
        entry.update(prepared.metadata)
        if prepared.warnings:
            entry["warnings"] = prepared.warnings
    return entry


def stack_builds(stack: Stack) -> list[dict[str, Any]]:
    """A derived stack's builds that are no release (a channel's dated build, a local wheel or
    tree by its content hash), as the manifest and every record keep them: never a path."""
    return [{k: v for k, v in dataclasses.asdict(b).items() if v} for b in stack.builds]


def parallel_entry(labels: list[str], why: str, gpus: list[Gpu],
                   placement: dict[str, Any]) -> dict[str, Any]:
    """The run's lanes and why, their GPUs, and what an executor that places cells says of
    where (a Ray cluster's address and figures)."""
    out: dict[str, Any] = {"lanes": labels, "reason": why}
    if gpus:
        out["gpus"] = [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in gpus]
    out.update(placement)
    return out


def build_manifest(matrix: Matrix, plan: Plan, run_id: str, *, executor: str,
                   executor_reason: str, flavour: Flavour, parallel: dict[str, Any],
                   gpu_clocks: dict[str, Any] | None, machine_profile: dict[str, Any],
                   environments: dict[str, dict[str, Any]]) -> Manifest:
    """The manifest of a run as it starts: built once, when its folder is made; updated as
    the run goes (add_environments, add_calibration, resumed, add_ending)."""
    return {
        "schema": SCHEMA,
        "name": matrix.spec.run.name,
        "run_id": run_id,
        "runner_version": runner_version(),
        "matrix": str(matrix.path),
        # A resume refuses another matrix: the digest of this one, profile applied.
        "matrix_sha256": resume.matrix_sha256(matrix.resolved),
        "profile": matrix.profile,
        "profile_reason": matrix.profile_reason,
        "executor": executor,
        "executor_reason": executor_reason,
        "flavour": flavour.name,
        "flavour_reason": flavour.reason,
        "parallel": parallel,
        "gpu_clocks": gpu_clocks,
        "machine_profile": machine_profile,
        "started_at": now(),
        "host": hostinfo.host_summary(),
        "environments": environments,
        # [workloads.*]: each user workload's file, code digest and staged copy in the run folder
        "workloads": {w.name: w.manifest_entry() for w in matrix.user_workloads},
        # [report]: the baselines of the effects (report RUN_DIR reads them from here).
        "report": matrix.spec.report.model_dump(),
        "cells": cell_entries(matrix, plan),
        # The run keeps a ledger (a deleted one is named so) and what it vouches for.
        "ledger": ledger.declaration(),
    }


def cell_entries(matrix: Matrix, plan: Plan) -> list[ManifestCell]:
    """The planned cells in matrix order, so reports list rows and environment columns as the
    matrix does."""
    planned = {c.id for c in plan.cells} | {c.id for c in plan.not_applicable}
    return [{"id": c.id, "name": c.name, "environment": c.environment, "repeats": c.repeats,
             "not_applicable": c.not_applicable,
             **({} if c.check_answers else {"check_answers": False})}
            for c in matrix.cells if c.id in planned]


def add_environments(manifest: Manifest, environments: dict[str, dict[str, Any]]) -> None:
    """Each environment's entry once preparing found its facts, over what the manifest held."""
    recorded = manifest.get("environments") or {}
    manifest["environments"] = {name: {**recorded.get(name, {}), **entry}
                                for name, entry in environments.items()}


def resumed(recorded: Manifest, matrix: Matrix, plan: Plan, executor: str) -> Manifest:
    """A resumed run's manifest: the run's own, updated, never rebuilt (its start, host and
    decisions stay; the history orders runs by started_at). Its cells: those it listed and those
    planned now (--only may differ between the two), as the plan has them now (a resume may add
    repeats); the digest of the matrix now; the resume noted; the ending of the last attempt
    cleared until this one ends."""
    manifest = cast(Manifest, {k: v for k, v in recorded.items()
                               if k not in ("finished_at", "interrupted", "stopped", "stopped_by")})
    planned = {c["id"]: c for c in cell_entries(matrix, plan)}
    listed = {c["id"]: c for c in recorded.get("cells", [])}
    order = dict.fromkeys([c.id for c in matrix.cells] + list(listed))
    manifest["cells"] = [planned.get(i) or listed[i] for i in order if i in planned or i in listed]
    manifest["matrix_sha256"] = resume.matrix_sha256(matrix.resolved)
    manifest["resumed"] = [*(recorded.get("resumed") or []), {"at": now(), "executor": executor}]
    return manifest


def add_calibration(manifest: Manifest, calibration: dict[str, Any] | None) -> None:
    """The peaks the run measured before its cells ([run] calibrate), or None."""
    manifest["calibration"] = calibration


def add_ending(manifest: Manifest, interrupted: bool, stopped: str | None) -> None:
    """How the run ended: when, whether it was interrupted, why it stopped if it did."""
    manifest["finished_at"] = now()
    manifest["interrupted"] = interrupted
    if stopped:
        manifest["stopped"] = one_line(stopped)


def add_cost(manifest: Manifest, price: dict[str, Any] | None, estimate: dict[str, Any] | None,
             budget: float | None, max_hours: float | None) -> None:
    """What the run pays (runner/cost/pricing.py: the price, its table, hash and date), its
    estimate before it ran, its caps; a resumed run keeps what its sessions spent before."""
    before = manifest.get("cost") or {}
    sessions = [*(before.get("sessions") or []),
                {"at": now(), "estimate_s": (estimate or {}).get("seconds")}]
    manifest["cost"] = {"price": price, "estimate": estimate, "budget": budget,
                        "max_hours": max_hours, "spent_s": before.get("spent_s") or 0.0,
                        "spent_usd": before.get("spent_usd"), "sessions": sessions}


def add_spending(manifest: Manifest, spent_s: float, spent_usd: float | None) -> None:
    """What the run has taken so far, all its sessions (the estimate's actual)."""
    manifest["cost"] = {**(manifest.get("cost") or {}), "spent_s": spent_s,
                        "spent_usd": spent_usd}


def add_stop(manifest: Manifest, by: str) -> None:
    """A cap stopped the run: "budget" or "max_hours" (its `stopped` says why)."""
    manifest["stopped_by"] = by


def add_blocks_from(manifest: Manifest, handed: HandedBlocks) -> None:
    """--blocks-from: the run whose block sizes this one timed, and how many cells took one."""
    manifest["blocks_from"] = {"run": str(handed.run), "cells": len(handed.sizes)}


def add_reproduces(manifest: Manifest, original: str) -> None:
    """The run folder a `runner reproduce` run ran again."""
    manifest["reproduces"] = original


# --- the manifest of a run as the pipeline opens it ---------------------------------------------

def opening_manifest(matrix: Matrix, plan: Plan, setup: Setup, store: Store,
                     prepared: dict[str, Prepared], resuming: bool) -> Manifest:
    """A new run's manifest, or a resumed run's own, updated for this resume."""
    if resuming:
        return resumed(store.read_manifest(), matrix, plan, setup.executor.name)
    lanes, why = setup.lanes()
    parallel = parallel_entry([lane.label for lane in lanes], why,
                              [lane.gpu for lane in lanes if lane.gpu is not None],
                              setup.executor.placement_manifest())
    return build_manifest(
        matrix, plan, store.run_id, executor=setup.executor.name,
        executor_reason=setup.reason, flavour=setup.flavour, parallel=parallel,
        gpu_clocks=setup.clocks,
        # results/<name>/<stamp>: the results folder holds machine-profiles/ too
        machine_profile=machine_profile.manifest_entry(store.root.parent.parent, setup.executor),
        environments=environment_entries(matrix, setup, prepared))


def environment_entries(matrix: Matrix, setup: Setup,
                        prepared: dict[str, Prepared]) -> dict[str, dict[str, Any]]:
    """Each environment as the matrix declares it, what runs it, and what preparing found."""
    entries = {}
    for name, env in matrix.spec.environments.items():
        source = setup.environment_source(matrix, name)
        executor, flavour, uses = setup.would_use(source)
        entries[name] = environment_entry(env, executor, flavour, uses,
                                          prepared.get(source.key), setup.stacks.get(name))
    return entries


def add_prepared(manifest: Manifest, matrix: Matrix, setup: Setup,
                 prepared: dict[str, Prepared]) -> None:
    """The environments' entries with what preparing them found."""
    add_environments(manifest, environment_entries(matrix, setup, prepared))


def add_tuning(manifest: Manifest, tuned: dict[str, dict[str, Any]]) -> None:
    """Per tuned cell's id, its knobs and where they came from (run/tiers.py), where any."""
    if tuned:
        manifest["tuning"] = tuned
