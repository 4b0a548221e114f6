"""Which of an API's knobs (its record's, apis.py) apply to a cell, and which combinations of
their values can run: what the tuned tier's search probes (runner/studies/tuning.py). Standard
library only; the worker applies a cell's knobs itself (runner/worker/tuning.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .api_base import Api, Knob
from .base import AXIS_DEFAULTS, Workload, not_applicable_reason

# The tuned tier's batch search ([tuning] batch = "max", docs/tuned.md): no API's knob — every
# cell has a batch — but carried in a tuned cell's knobs and applied like one
# (runner/worker/tuning.py: the spec's batch_size replaced; the record keeps the cell's own).
# Fit, predict and run (the ops' independent products, the selftest) cells; never generate,
# whose batch changes what is decoded.
BATCH_SIZE = Knob("batch_size", (None,), "the largest batch that ran, less a headroom "
                  "([tuning] batch = \"max\")", axis="batch_size",
                  tasks=("fit", "predict", "run"))


def knob_named(record: Api, name: str) -> Knob | None:
    """The record's knob of that name, or the batch search's; None for no knob."""
    return record.knob(name) or (BATCH_SIZE if name == BATCH_SIZE.name else None)


def applicable(record: Api, workload: Workload, task: str, axes: Mapping[str, Any],
               device: str) -> list[Knob]:
    """The record's knobs that apply to a cell on `device` ("gpu" or "cpu"): each of its
    filters admits the cell, and the cell does not set the knob's axis itself (a matrix that
    asks for jit = true has chosen: the tuned tier keeps it)."""
    out = []
    for knob in record.knobs:
        admitted = (
            (not knob.tasks or task in knob.tasks)
            and (not knob.precisions or axes.get("precision") in knob.precisions)
            and (not knob.workloads or workload.name in knob.workloads)
            and (not knob.families or workload.family in knob.families)
            and (not knob.devices or device in knob.devices)
            and (knob.axis is None or axes.get(knob.axis) == AXIS_DEFAULTS[knob.axis]))
        if admitted and len(knob.values_on(device)) > 1:
            out.append(knob)
    return out


def blocked(knobs: Sequence[Knob], setting: Mapping[str, Any], workload: Workload | str,
            api: str, backend: str | None, axes: Mapping[str, Any], task: str,
            batch_size: int | None, options: Mapping[str, Any] | None = None) -> str | None:
    """Why a setting of knob values cannot run on the cell (None: it can): a knob on whose
    other knob it depends is at its default, or the axes it sets make the cell not applicable
    (steps_per_execution on Keras's torch backend, say)."""
    by_name = {k.name: k for k in knobs}
    for name, value in setting.items():
        knob = by_name[name]
        if knob.only_with is not None and value != knob.default:
            other = by_name.get(knob.only_with)
            if other is None or setting.get(other.name, other.default) == other.default:
                return f"{name} needs {knob.only_with}"
    changed: dict[str, Any] = {}
    for name, value in setting.items():
        axis = by_name[name].axis
        if axis is not None:
            changed[axis] = value
    if not changed:
        return None
    return not_applicable_reason(workload, api, backend, {**axes, **changed}, task, batch_size,
                                 dict(options or {}))


def grid(knobs: Sequence[Knob], device: str) -> Iterator[dict[str, Any]]:
    """Every setting of the knobs' values (the defaults first), as knob → value."""
    names = [k.name for k in knobs]
    for values in itertools.product(*(k.values_on(device) for k in knobs)):
        yield dict(zip(names, values, strict=True))


def changed(knobs: Sequence[Knob], setting: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs a setting moves off their defaults (what a cell's spec carries)."""
    defaults = {k.name: k.default for k in knobs}
    return {name: value for name, value in setting.items() if defaults.get(name) != value}


def runnable(knobs: Sequence[Knob], device: str, workload: Workload | str, api: str,
             backend: str | None, axes: Mapping[str, Any], task: str,
             batch_size: int | None, options: Mapping[str, Any] | None = None) -> list[Knob]:
    """The knobs with a value off their default that the cell can run (the one they need on,
    where they need one): a knob all of whose values the cell cannot take is no knob of it
    (steps_per_execution on a keras-hub cell)."""
    def can(setting: dict[str, Any]) -> bool:
        return blocked(knobs, setting, workload, api, backend, axes, task, batch_size,
                       options) is None

    def on(knob: Knob) -> dict[str, Any] | None:
        """A setting that turns `knob` off its default and can run, else None."""
        partner = next((k for k in knobs if k.name == knob.only_with), None)
        partners = [{}] if partner is None else [{partner.name: v}
                                                 for v in partner.values_on(device)[1:]]
        for value in knob.values_on(device)[1:]:
            for extra in partners:
                if can({**extra, knob.name: value}):
                    return {**extra, knob.name: value}
        return None

    return [k for k in knobs if on(k) is not None]
