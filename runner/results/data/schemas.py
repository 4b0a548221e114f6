"""What the runner reads back from a run folder, validated as data in the matrix schema's style
(pydantic, strict, one line per problem): cell records and the run manifest. Run folders travel
between machines (`reproduce`, `compare`), so nothing in them is trusted because of where it
lies. The record's fields are declared once, in runner.worker.protocol's `Record`: each field's
type, its bounds, who fills it and what it means. The model below is built from its annotations
(the worker's standard-library bounds become pydantic's), and adds only the checks a type cannot
say (names that must be safe to show, the figures of `extra`, an ok record's samples).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import types
import typing
from typing import Annotated, Any, Literal, cast
from collections.abc import Mapping

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, create_model,
                      field_validator, model_validator)

from ...schema import RUN_NAME_PATTERN, format_error
from ...worker.catalog import AXIS_DEFAULTS
from ...worker.protocol import RECORD_FIELDS, Filled
from .types import MAX_FIGURE, MAX_SAMPLE_MS, MIN_SAMPLE_MS, Bounds, Record


def checked(kind: Any) -> Any:
    """A type of Record as pydantic checks it: its Bounds as pydantic's constraints, who fills it
    (Filled) left out, at any depth (the bounds of a list's items, of an optional figure)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Annotated:
        kept = [Field(**{k: v for k, v in vars(m).items() if v is not None})
                if isinstance(m, Bounds) else m for m in kind.__metadata__
                if not isinstance(m, Filled)]
        inner = checked(args[0])
        return typing.Annotated[inner, *kept] if kept else inner
    if origin in (types.UnionType, typing.Union):       # X | None: rebuilt as written
        return functools.reduce(operator.or_, [checked(a) for a in args])
    if origin in (list, dict):
        return origin[tuple(checked(a) for a in args)]
    return kind


# Every record field's type, bounds included: Record's annotations (Any: taken as it is).
RECORD_TYPES: dict[str, Any] = {name: checked(kind) for name, kind in
                                typing.get_type_hints(Record, include_extras=True).items()}
# A record is found by these; everything else may be null (unknown).
REQUIRED = ("schema", "status", "cell_id", "cell_name", "repeat", "environment", "workload",
            "task", "batch_size")


class _Data(BaseModel):
    # Unknown keys are ignored (a newer runner's fields); inf and nan are no measurement.
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


class _Names(_Data):
    """The names a record or a profile shows, checked as the matrix checks them."""

    @field_validator("environment", check_fields=False)
    @classmethod
    def _safe_environment(cls, value: str) -> str:
        # The matrix schema's pattern: a name from a crafted folder cannot become Markdown,
        # markup or a path in the reports.
        import re

        if not re.match(RUN_NAME_PATTERN, value):
            raise ValueError(f"{value[:40]!r} is not an environment name (letters, digits, . _ -)")
        return value

    @field_validator("cell_id", "cell_name", "workload", "task", check_fields=False)
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value or any(not c.isprintable() for c in value):
            raise ValueError(f"{value[:40]!r}: empty, or holds a control character")
        return value


class _RecordChecks(_Names):
    # Two of the record's fields (RecordModel adds every field of RECORD_FIELDS) the checks
    # below read, declared here so they can name them.
    status: str
    samples_ms: Any = None

    @field_validator("extra", check_fields=False)
    @classmethod
    def _extra_figures(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in EXTRA_FIGURES:
            figure = (value or {}).get(key)
            if figure is not None and not _bounded(figure):
                raise ValueError(f"extra.{key}: expected a number of at most {MAX_FIGURE:g}, "
                                 f"got {figure!r:.40}")
        return value

    @model_validator(mode="after")
    def _ok_has_samples(self) -> _RecordChecks:
        if self.status == "ok" and not positive_samples(self.samples_ms):
            raise ValueError("status 'ok' without finite positive samples_ms")
        return self


def _field(name: str) -> tuple[Any, Any]:
    default: Any = ... if name in REQUIRED else [] if name == "samples_ms" else None
    # "schema" would shadow pydantic's own attribute: the field is schema_, read as "schema".
    return RECORD_TYPES.get(name, Any), Field(default, alias=name)


_RECORD_MODEL_FIELDS: dict[str, Any] = {("schema_" if n == "schema" else n): _field(n)
                                        for n in RECORD_FIELDS}
RecordModel = create_model("RecordModel", __base__=_RecordChecks, **_RECORD_MODEL_FIELDS)


# The figures of a record's free-form `extra` the reports compute with.
EXTRA_FIGURES = ("telemetry_window_s", "epoch_s")


def _bounded(value: Any) -> bool:
    # abs() first: a whole number too large for a float is compared exactly, never converted
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and abs(value) <= MAX_FIGURE and math.isfinite(value)


def positive_samples(samples: Any) -> bool:
    """Non-empty, and every sample a finite number of at least MIN_SAMPLE_MS (a nanosecond) and
    at most MAX_SAMPLE_MS: what an ok measurement is."""
    return isinstance(samples, list) and bool(samples) and all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)
        and MIN_SAMPLE_MS <= s <= MAX_SAMPLE_MS for s in samples)


def problem_of(model: type[BaseModel], data: Any) -> str | None:
    """None when `data` is valid, else the first problem as one short line."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return format_error(exc.errors()[0])
    return None


def record_problem(data: Any, key: str | None = None) -> str | None:
    """Why a stored record cannot be used (None: it can). `key`: its file's stem, which must be
    the record's own cell id and repeat (a record cannot stand in for another cell)."""
    problem = problem_of(RecordModel, data)
    if problem is None and key is not None and key != f"{data['cell_id']}-r{data['repeat']}":
        problem = f"holds cell {data['cell_id']!r} repeat {data['repeat']}, not {key}"
    return problem


def complete_record(data: dict[str, Any]) -> Record:
    """A valid record with every field present (an absent one is null: unknown): the typed
    Record (results/data/types.py) every reader gets. An axis the record does not name is one
    declared after it was written (devices, scaling): it ran at that axis's default."""
    return cast(Record, {**dict.fromkeys(RECORD_FIELDS), **AXIS_DEFAULTS, **data})


def record_of(fields: Mapping[str, Any]) -> Record:
    """A record being built (records.py): exactly the fields of RECORD_FIELDS, in their order,
    None where `fields` has none. Its values are the spec's and the worker's, whose result was
    validated first (records.worker_problem); the host then sets its own fields, typed."""
    return cast(Record, {k: fields.get(k) for k in RECORD_FIELDS})


# --- profile -----------------------------------------------------------------------------------

StepTime = Annotated[float, Field(ge=0.0, le=MAX_SAMPLE_MS)]     # a step: 0 to a week, in ms


class ProfileModel(_Names):
    """profile.json of a profiled pass (results/data/profiles.py writes it): what the report
    and `profile diff` read of it, its times finite and within a week."""

    schema_: Literal[1] = Field(1, alias="schema")
    status: Literal["ok", "failed"]
    cell_id: str
    cell_name: str
    environment: str
    workload: str
    task: str
    batch_size: Annotated[int, Field(gt=0)]
    row: str
    error: str | None = None
    source: str | None = None
    device: str | None = None
    log: str | None = None
    warnings: list[str] = Field(default_factory=list)
    timed_median_ms: StepTime | None = None
    profiled_step_ms: StepTime | None = None
    step_ms: list[StepTime | None] = Field(default_factory=list)
    profile_overhead: Annotated[float, Field(ge=0.0, le=MAX_FIGURE)] | None = None
    wall_s: Annotated[float, Field(ge=0.0, le=MAX_FIGURE)] | None = None


def profile_problem(data: Any) -> str | None:
    return problem_of(ProfileModel, data)


# --- manifest ---------------------------------------------------------------------------------

class ManifestCell(_Data):
    id: str
    name: str | None = None
    environment: str | None = None
    repeats: int | None = None
    not_applicable: str | None = None
    check_answers: bool | None = None


class ManifestReport(_Data):
    """[report] as the run recorded it: the effects' baselines."""

    baselines: dict[str, Any] = Field(default_factory=dict)
    baseline_environment: str | None = None

    @field_validator("baselines")
    @classmethod
    def _options_table(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("options", {}), dict):
            raise ValueError("baselines.options must be a table")
        return value


class ManifestModel(_Data):
    schema_: Literal[1] = Field(1, alias="schema")
    name: str = Field(pattern=RUN_NAME_PATTERN)
    profile: Literal["full", "smoke"] | None = None
    executor: str | None = None
    # "node": a Ray run, whose nodes each decide cpu or cuda (reproduce refuses Ray runs).
    flavour: Literal["cpu", "cuda", "node"] | None = None
    environments: dict[str, dict[str, Any]] = Field(default_factory=dict)
    cells: list[ManifestCell] = Field(default_factory=list)
    report: ManifestReport | None = None
    calibration: dict[str, Any] | None = None
    matrix_sha256: str | None = None
    resumed: list[dict[str, Any]] | None = None


def manifest_problem(data: Any) -> str | None:
    return problem_of(ManifestModel, data)


def parse_json(text: str | bytes) -> Any:
    """json.loads, with nesting too deep for Python reported as ValueError like any other
    malformed file."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
