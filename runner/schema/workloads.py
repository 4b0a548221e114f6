"""A [workloads.<name>] table: a workload whose code is in the user's own file. Validating it
reads the file (never imports it: user_workloads.py), so the benchmarks validated after
it know the workload's tasks, options and the APIs it applies to."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator

from ..worker import catalog
from .user_workloads import UserWorkload, read as read_user_workload
from .values import NAME, Strict, no_control, shown

# The validation context's keys (schema.validate passes them).
BASE = "matrix_folder"          # relative files are relative to the matrix's folder
USER = "user_workloads"         # filled here: name → UserWorkload, read by the benchmarks


class WorkloadSpec(Strict):
    file: str = Field(min_length=1)
    tasks: list[Literal[catalog.TASKS]] = Field(min_length=1)  # type: ignore[valid-type]
    # The options' defaults (a benchmark may override or sweep each, as any option).
    options: dict[str, Any] = Field(default_factory=dict)
    # The digest of the file and the .py files beside it: when given, the code must be this.
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    _read: UserWorkload | None = PrivateAttr(None)

    @field_validator("file", mode="after")
    @classmethod
    def _file(cls, value: str) -> str:
        return no_control(value) or value

    @field_validator("tasks", mode="after")
    @classmethod
    def _tasks(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"repeated task in {value}")
        return value

    @field_validator("options", mode="after")
    @classmethod
    def _options(cls, options: dict[str, Any]) -> dict[str, Any]:
        for key, value in options.items():
            if not key.isidentifier():
                raise ValueError(f"{shown(key)}: an option name is letters, digits and '_'")
            if not isinstance(value, (bool, int, float, str)):
                raise ValueError(f"{key}: a default is one number, string or boolean, got "
                                 f"{shown(value)} (sweep values in a benchmark's options)")
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{key}: must be a finite number, got {value}")
            if isinstance(value, str):
                no_control(value)
        return options

    @property
    def read(self) -> UserWorkload:
        assert self._read is not None, "validated without a context (schema.validate sets one)"
        return self._read


def read_workloads(workloads: dict[str, WorkloadSpec],
                   info: ValidationInfo) -> dict[str, WorkloadSpec]:
    """MatrixSpec's validator of its `workloads` table: each name checked, each file read."""
    context = info.context if isinstance(info.context, dict) else {}
    base = Path(context.get(BASE) or Path.cwd())
    read = context.setdefault(USER, {}) if isinstance(info.context, dict) else {}
    for name, spec in workloads.items():
        if not NAME.match(name):
            raise ValueError(f"{shown(name)}: a workload name must be letters, digits, '.', "
                             "'_' or '-' (at most 64; it names rows and cells)")
        if name in catalog.WORKLOADS:
            raise ValueError(f"{name}: a built-in workload has this name; choose another")
        # ".<name>": the error's key path goes on from `workloads` (schema.format_error)
        spec._read = read_user_workload(name, spec.file, tuple(spec.tasks), spec.options,
                                         spec.sha256, base, where=f".{name}")
        read[name] = spec._read
    return workloads


def known_workload(name: str, info: ValidationInfo) -> catalog.Workload:
    """A benchmark's workload: a built-in one, or one of the matrix's [workloads.*]."""
    context = info.context if isinstance(info.context, dict) else {}
    user = context.get(USER, {})
    if name in user:
        return user[name].workload
    if name in catalog.WORKLOADS:
        return catalog.WORKLOADS[name]
    from ..errors import did_you_mean

    known = [*catalog.WORKLOADS, *user]
    raise ValueError(f"workload: {shown(name)} is not a built-in workload ({', '.join(catalog.WORKLOADS)}) "
                     f"nor one of this matrix's [workloads.*]{did_you_mean(name, known)}")
