"""The plan as data (`python -m runner plan --json`): every cell the selection keeps, with its
state (to run, done, not applicable and why), its coordinates and what one run of it is
expected to take; the calibrations; the setup; and the run's estimate. For tools that plan
around a run (benchmarks/gpu_check/ sizes its parts by it) instead of copying the runner's
rules. Its layout is versioned like every file the runner writes ("schema": 1)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..cost.estimate import Span, span_entry
from ..schema.matrix import Cell
from .state import RunState

SCHEMA = 1


def plan_document(state: RunState) -> dict[str, Any]:
    """What the plan step decided, as plain JSON values."""
    matrix, setup, plan = state.matrix, state.setup, state.plan
    estimate = state.decisions.estimate
    pending = Counter(e.cell.id for e in plan.to_run)
    done = Counter(e.cell.id for e in plan.done)
    first: dict[str, str] = {}
    for entry in plan.to_run:
        first.setdefault(entry.cell.id, entry.key)
    spans = estimate.entries if estimate is not None else {}
    cells = [cell_entry(c, "to run" if pending[c.id] else "done", pending[c.id], done[c.id],
                        spans.get(first.get(c.id, "")))
             for c in plan.cells]
    cells += [cell_entry(c, "not applicable", 0, 0, None) for c in plan.not_applicable]
    return {"schema": SCHEMA, "matrix": str(matrix.path), "profile": matrix.profile,
            "profile_reason": matrix.profile_reason, "executor": setup.executor.name,
            "executor_reason": setup.reason, "flavour": setup.flavour.name,
            "lanes": len(setup.lanes()[0]), "cells": cells, "filtered_out": plan.filtered_out,
            "calibrations": [calibration_entry(c) for c in state.calibrations],
            "estimate": estimate.entry() if estimate is not None else None}


def cell_entry(cell: Cell, status: str, runs: int, done: int, span: Span | None) -> dict[str, Any]:
    """One cell: who it is, its state, and the estimate of one of its runs (a process)."""
    return {"id": cell.id, "name": cell.name, "environment": cell.environment, "api": cell.api,
            "backend": cell.backend, "image": cell.image, "python": cell.python,
            "workload": cell.workload, "task": cell.task, "batch_size": cell.batch_size,
            "axes": dict(cell.axes), "options": cell.options, "repeats": cell.repeats,
            "steps": cell.steps, "warmup_steps": cell.warmup_steps, "timeout": cell.timeout,
            "status": status, "not_applicable": cell.not_applicable, "runs": runs,
            "done": done, "run_s": span_entry(span) if span is not None else None}


def calibration_entry(cell: Cell) -> dict[str, Any]:
    return {"id": cell.id, "name": cell.name, "environment": cell.environment,
            "api": cell.api, "backend": cell.backend, "precision": cell.axes.precision}

