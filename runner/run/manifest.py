"""A run's manifest (results/data/manifest.py lays it out) as the pipeline keeps it: built once,
when the run folder is made, then updated as the run goes — the environments once prepared, the
calibration, each resume, the ending — never rebuilt, so that what it recorded at the start
(when, where, which decisions) stays what the run was."""

from __future__ import annotations

from typing import Any

from ..machine import profile as machine_profile
from ..results.data import manifest as manifest_mod
from ..results.data.types import Manifest
from .state import RunState


def opening_manifest(state: RunState) -> Manifest:
    """A new run's manifest, or a resumed run's own, updated for this resume."""
    if state.opts.resume:
        return manifest_mod.resumed(state.store.read_manifest(), state.matrix, state.plan,
                                    state.setup.executor.name)
    matrix, setup, store = state.matrix, state.setup, state.store
    lanes, why = setup.lanes()
    parallel = manifest_mod.parallel_entry([lane.label for lane in lanes], why,
                                           [lane.gpu for lane in lanes if lane.gpu is not None],
                                           setup.executor.placement_manifest())
    return manifest_mod.build_manifest(
        matrix, state.plan, store.run_id, executor=setup.executor.name,
        executor_reason=setup.reason, flavour=setup.flavour, parallel=parallel,
        gpu_clocks=setup.clocks,
        # results/<name>/<stamp>: the results folder holds machine-profiles/ too
        machine_profile=machine_profile.manifest_entry(store.root.parent.parent, setup.executor),
        environments=environment_entries(state))


def environment_entries(state: RunState) -> dict[str, dict[str, Any]]:
    """Each environment as the matrix declares it, what runs it, and what preparing found."""
    entries = {}
    for name, env in state.matrix.spec.environments.items():
        source = state.setup.environment_source(state.matrix, name)
        executor, flavour, uses = state.setup.would_use(source)
        entries[name] = manifest_mod.environment_entry(env, executor, flavour, uses,
                                                       state.progress.prepared.get(source.key),
                                                       state.setup.stacks.get(name))
    return entries


def add_prepared(state: RunState) -> None:
    """The environments' entries with what preparing them found."""
    manifest_mod.add_environments(state.progress.manifest, environment_entries(state))
