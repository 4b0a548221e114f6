"""The catalog's shapes and registries: what an axis, a workload and a not-applicable rule are, and
the functions that declare them (axes.py, workloads.py and rules.py use them; so may a test that
adds a toy axis or workload). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

from .api_base import API_RECORDS, Api, api

# --- axes -------------------------------------------------------------------------------------

# How a value of an axis is checked (runner/schema/values.py turns each kind into a check).
AXIS_KINDS = ("choice", "bool_or_choice", "bool", "positive_int")


@dataclass(frozen=True)
class Axis:
    name: str
    kind: str                      # one of AXIS_KINDS
    type: Any                      # the value's type in a cell spec and a result record
    default: Any = None            # the value of a benchmark that does not set the axis
    values: tuple[Any, ...] = ()   # "choice", "bool_or_choice": the words allowed
    # Its label in cell names: None, the axis name ("size=tiny"); "" the value alone
    # ("bfloat16"); else that short name ("spe=64").
    short: str | None = None
    help: str = ""
    # task and batch_size: the workload decides the default (its one task; batch 1 unless it
    # needs one); they are the cell's own fields rather than among its `axes`.
    per_workload: bool = False


AXES: dict[str, Axis] = {}
# The setting axes' defaults (every axis but the per-workload ones), in declaration order.
AXIS_DEFAULTS: dict[str, Any] = {}


def declare_axis(axis: Axis) -> Axis:
    if axis.kind not in AXIS_KINDS:
        raise ValueError(f"axis {axis.name}: kind {axis.kind!r} is not one of {AXIS_KINDS}")
    AXES[axis.name] = axis
    if not axis.per_workload:
        AXIS_DEFAULTS[axis.name] = axis.default
    return axis


def setting_axes() -> tuple[str, ...]:
    """The axes a cell carries in `Cell.axes` (a record: after task and batch_size)."""
    return tuple(AXIS_DEFAULTS)


# --- workloads --------------------------------------------------------------------------------

FAMILIES = ("ops", "model", "hub", "layer", "diagnostic", "user")


@dataclass(frozen=True)
class Option:
    type: type
    help: str
    positive: bool = False
    local_path: bool = False        # a folder on the machine that runs the cell, never a URL
    choices: tuple[str, ...] = ()   # the words it allows (() any value of its type)
    # It picks what a cell computes (a layer), not a setting of the same work: cells that differ
    # in it are other rows of the report, never an effect of one thing changed.
    names_the_work: bool = False


@dataclass(frozen=True)
class Workload:
    name: str
    tasks: tuple[str, ...]
    needs_batch_size: bool
    precisions: tuple[str, ...]
    options: dict[str, Option] = field(default_factory=dict)
    uses_data_axis: bool = False           # only model-training workloads read `data`
    help: str = ""
    # What the not-applicable rules ask of a workload: "ops" (array operations, no model),
    # "model" (a training loop), "hub" (a keras-hub model), "layer" (one layer, its phases as
    # tasks: catalog/layers.py), "diagnostic".
    family: str = "model"
    # Size presets that options may override: size → {option: value}.
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # APIs without a module on purpose, each with the reason a cell there is not applicable.
    not_applicable: dict[str, str] = field(default_factory=dict)
    # A user workload (family "user", declared from a matrix's [workloads.*] table): the file as
    # the matrix names it, and per API each task its functions implement and how: "model"
    # (keras_model and keras_data, trained or predicted by the runner's Keras loop) or "step"
    # (a function returning one step). An API or task it defines nothing for is not applicable.
    origin: str = ""
    api_tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    # The task of a benchmark that names none, where the workload has several (the CNN: fit,
    # as before it had a predict task); None: a workload of several tasks needs one named.
    default_task: str | None = None

    def runs_as(self, api: str, task: str) -> str | None:
        """A user workload's "model" or "step" for this API and task (None: not defined)."""
        return self.api_tasks.get(api, {}).get(task)

    @property
    def apis(self) -> tuple[str, ...]:
        """The APIs that run it: those whose record names a module for it; a user workload's,
        those its file defines functions for."""
        if self.family == "user":
            return tuple(self.api_tasks)
        return tuple(name for name, record in API_RECORDS.items() if self.name in record.workloads)
    # The tasks a step of it can shard over several devices (the devices axis, docs/scaling.md);
    # () where it has no data-parallel recipe. A user workload's Keras model shards fit and
    # predict (rules.py data_parallel).
    data_parallel: tuple[str, ...] = ()
    # The dense-arithmetic paths its FLOPs run on ("matmul", "conv"): which TF32 switches change
    # its arithmetic, and whether a measured peak (dense matmuls) means anything for it. () for
    # work bound by memory or the host (elementwise, diagnostics): no TF32 and no % of peak.
    dense_paths: tuple[str, ...] = ("matmul",)


WORKLOADS: dict[str, Workload] = {}


def declare_workload(workload: Workload) -> Workload:
    if workload.family not in FAMILIES:
        raise ValueError(f"workload {workload.name}: family {workload.family!r} is not one of "
                         f"{FAMILIES}")
    WORKLOADS[workload.name] = workload
    return workload


def is_hub(workload: str) -> bool:
    """A keras-hub model (the Keras 3 benchmark table's rows)."""
    known = WORKLOADS.get(workload)
    return known is not None and known.family == "hub"


def dense_paths(workload: str) -> tuple[str, ...]:
    """The dense paths a workload's FLOPs run on (an unknown one: the matmul path)."""
    known = WORKLOADS.get(workload)
    return known.dense_paths if known is not None else ("matmul",)


def default_sizes(workload: str, size: str) -> dict[str, Any]:
    """Size presets that options may override."""
    known = WORKLOADS.get(workload)
    return dict(known.sizes.get(size, {})) if known is not None else {}


# --- where a value does not apply -------------------------------------------------------------


@dataclass(frozen=True)
class Where:
    """A cell as the not-applicable rules see it."""

    workload: Workload
    api: str
    backend: str | None
    task: str
    axes: dict[str, Any]
    batch_size: int | None = None         # None: a caller that does not place a batch
    options: dict[str, Any] = field(default_factory=dict)   # the cell's options (layer's)

    @property
    def record(self) -> Api:
        """The API's record on the cell's backend."""
        return api(self.api, self.backend)


Rule = Callable[[Where], "str | None"]
# (the axis a rule is about, or None for the workload itself; the rule), in the order they are
# asked: the first reason found is the cell's.
RULES: list[tuple[str | None, Rule]] = []


def rule(axis: str | None = None) -> Callable[[Rule], Rule]:
    """Declares a not-applicable rule (rules.py): a function of a Where that returns the reason
    a cell does not apply, or None."""
    def register(check: Rule) -> Rule:
        RULES.append((axis, check))
        return check
    return register


def not_applicable_reason(workload: str | Workload, api: str, backend: str | None,
                          axes: dict[str, Any], task: str,
                          batch_size: int | None = None,
                          options: dict[str, Any] | None = None) -> str | None:
    """Why a valid cell cannot run in this environment, or None when it applies (`workload`: a
    declared name, or a Workload itself: a user workload, never in WORKLOADS).

    Only combinations that are meaningful elsewhere land here; values that are wrong everywhere
    are validation errors in the matrix schema."""
    declared = WORKLOADS[workload] if isinstance(workload, str) else workload
    where = Where(declared, api, backend, task, axes, batch_size, dict(options or {}))
    for _, check in RULES:
        reason = check(where)
        if reason is not None:
            return reason
    return None
