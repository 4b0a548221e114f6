"""A tuned cell's (or a tuning probe's) knobs, applied by the worker before anything runs
(docs/tuned.md). The spec's `tuning` names each knob its API's record declares
(catalog/apis.py), or the batch search's batch_size (catalog/knobs.py), with the value to run: a knob that sets an axis replaces that axis's value in
the spec the worker measures (the record keeps the cell's own axis values, and `effective`
says what ran), a knob that sets a variable is set before the framework is imported, and the
rest stay in spec.tuning for the API's own code to read. Standard library only."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from . import catalog
from .catalog.knobs import knob_named
from .protocol import CellSpec


def applied(spec: CellSpec) -> CellSpec:
    """The spec the worker runs: the cell's, with its knobs in place (variables set here, so
    call it before the framework is imported). An undeclared knob is an error (status failed)."""
    if not spec.tuning:
        return spec
    record = catalog.api(spec.api, spec.backend)
    changes: dict[str, Any] = {}
    for name, value in spec.tuning.items():
        knob = knob_named(record, name)
        if knob is None:
            raise ValueError(f"{record.title} has no knob {name!r} (catalog/apis.py declares "
                             f"{', '.join(k.name for k in record.knobs) or 'none'})")
        if knob.axis is not None:
            changes[knob.axis] = value
        elif knob.variable is not None and value:
            os.environ[knob.variable] = " ".join(
                filter(None, [os.environ.get(knob.variable, ""), str(value)]))
    return dataclasses.replace(spec, **changes)


def knob(spec: CellSpec, name: str, default: Any = None) -> Any:
    """A knob's value for this cell: the spec's, else its declared default (an API's code reads
    its own knobs this way), else `default` (an API that runs the code without the knob)."""
    if name in spec.tuning:
        return spec.tuning[name]
    declared = catalog.api(spec.api, spec.backend).knob(name)
    return declared.default if declared is not None else default
