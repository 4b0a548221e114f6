"""A [[benchmarks]] table: the workload, its environments and options, per-benchmark counts,
and one field per axis of the catalog (runner.worker.catalog), a value or a list of values."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Literal

from pydantic import (Field, PositiveFloat, PositiveInt, ValidationInfo, create_model,
                      field_validator, model_validator)

from ..errors import did_you_mean
from ..worker import catalog
from .values import AXES, MAX_REPEATS, MAX_TIMEOUT_S, Strict, check_axis, check_steps, shown
from .workloads import known_workload


def _tasks(workload: catalog.Workload, tasks: tuple[str, ...] | None) -> tuple[str, ...]:
    """A benchmark's tasks: its workload's one (or default) task when it names none (a user
    workload's: every task it declares)."""
    if tasks is None:
        if workload.default_task is not None:
            return (workload.default_task,)
        if len(workload.tasks) != 1 and workload.family != "user":
            raise ValueError(f"task: {workload.name} needs one of {', '.join(workload.tasks)}")
        return workload.tasks
    for task in tasks:
        if task not in workload.tasks:
            raise ValueError(f"task: {workload.name} has no task {shown(task)} "
                             f"(it has {', '.join(workload.tasks)})")
    return tasks


def option_type_error(where: str, option: catalog.Option, value: Any) -> str | None:
    expected = (int, float) if option.type is float else option.type
    if isinstance(value, bool) != (option.type is bool) or not isinstance(value, expected):
        return f"{where}: expected {option.type.__name__}, got {shown(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: must be a finite number, got {value}"
    return None


def check_option(where: str, option: catalog.Option, value: Any) -> Any:
    """The value, checked, as its declared type holds it: a whole number given to a float
    option is that float (sleep_ms = 1 and 1.0 are one cell, one id, in every run)."""
    problem = option_type_error(where, option, value)
    if problem is None and isinstance(value, str) and any(not c.isprintable() for c in value):
        problem = f"{where}: {shown(value)} holds a control character"
    if problem is None and option.local_path and re.match(r"[A-Za-z][\w+.-]*://", str(value)):
        problem = (f"{where}: {shown(value)} is a hub handle, not a local folder; nothing is "
                   "downloaded: download the preset yourself and give its folder")
    if problem is None and option.positive and value <= 0:
        problem = f"{where}: must be positive, got {value}"
    if problem is None and option.choices and value not in option.choices:
        allowed = ", ".join(option.choices) if len(option.choices) <= 6 \
            else f"the {len(option.choices)} values it allows"
        problem = (f"{where}: {shown(value)} is not one of {allowed}"
                   f"{did_you_mean(str(value), option.choices)}")
    if problem is not None:
        raise ValueError(problem)
    if option.type is float and not isinstance(value, float):
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"{where}: must be a finite number, got {shown(value)}") from None
    return value


class _Benchmark(Strict):
    """A [[benchmarks]] table but its axes: BenchmarkSpec adds one field per axis."""

    # A built-in workload (runner.worker.catalog) or one of the matrix's [workloads.*].
    workload: str
    environments: list[str] = Field(default_factory=lambda: ["*"], min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    # Per-benchmark overrides of [run] counts.
    steps: Any = None
    warmup_steps: PositiveInt | None = None
    repeats: PositiveInt | None = Field(None, le=MAX_REPEATS)
    timeout: PositiveFloat | None = Field(None, le=MAX_TIMEOUT_S)
    # Compare what each cell computed (its answer) with the other environments of its row; false
    # where the APIs are known to compute differently (the report says the check was off).
    check_answers: bool = True
    # The profiles this benchmark runs under (None: every one). Under another it has no cells:
    # the run leaves it out and says so (the profile's line counts what each profile leaves
    # out), so that a matrix can hold a GPU table and a CPU first look without either's report
    # filling with NA rows of the other's (the canonical matrix: its smoke rows and full rows).
    profiles: list[Literal["full", "smoke"]] | None = Field(None, min_length=1)
    # Two of the catalog's axes the validator below completes from the workload (BenchmarkSpec
    # adds every axis as a field; these two are declared here so the validator can name them).
    task: Any = None
    batch_size: Any = None

    @field_validator(*AXES, mode="after", check_fields=False)
    @classmethod
    def _axis(cls, value: Any, info) -> Any:
        return None if value is None else check_axis(info.field_name, value)

    @field_validator("steps", mode="after")
    @classmethod
    def _steps(cls, value: Any) -> int | str | None:
        return None if value is None else check_steps(value)

    @model_validator(mode="after")
    def _against_workload(self, info: ValidationInfo) -> _Benchmark:
        workload = known_workload(self.workload, info)
        self.task = _tasks(workload, self.task)
        if self.batch_size is None:
            if workload.needs_batch_size:
                raise ValueError(f"batch_size: required for {self.workload}")
            self.batch_size = (1,)
        for key, given in self.options.items():
            option = workload.options.get(key)
            if option is None:
                raise ValueError(f"options.{key}: unknown option for {self.workload}"
                                 f"{did_you_mean(key, workload.options)}")
            # Like an axis, an option given as a list yields one cell per value.
            values = given if isinstance(given, list) else [given]
            if not values:
                raise ValueError(f"options.{key}: empty list: give at least one value")
            checked = [check_option(f"options.{key}", option, value) for value in values]
            self.options[key] = checked if isinstance(given, list) else checked[0]
        return self

    def cell_count(self, environments: int) -> int:
        """Cells this benchmark expands to, counted without expanding it."""
        options = math.prod(len(v) if isinstance(v, list) else 1 for v in self.options.values())
        return environments * options * math.prod(len(self.axis_values(a)) for a in AXES)

    def option_grid(self) -> list[dict[str, Any]]:
        """Every combination of list-valued options (one dict per cell)."""
        keys = list(self.options)
        lists = [v if isinstance(v, list) else [v] for v in self.options.values()]
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*lists)]

    def axis_values(self, name: str) -> tuple[Any, ...]:
        value = getattr(self, name)
        return value if value is not None else (catalog.AXIS_DEFAULTS[name],)


# Axes: one field per axis of the catalog, a value or a list of values (tuples of values after
# validation); None: the axis's default.
_AXIS_FIELDS: dict[str, Any] = {name: (Any, None) for name in AXES}
BenchmarkSpec = create_model("BenchmarkSpec", __base__=_Benchmark, __module__=__name__,
                             **_AXIS_FIELDS)


