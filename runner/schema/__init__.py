"""The matrix schema: the one definition of what matrix.toml may contain.

Structure and types are pydantic models (strict: no silent coercion, unknown keys rejected):
tables.py ([run], [environments.*], [history], [report], [profiles.*], the whole matrix),
benchmark.py ([[benchmarks]]); values.py checks single values, the benchmark axes' by the kinds
runner.worker.catalog declares, which the worker shares. Every error becomes one line:
"<file>: <key path>: <what is wrong>" with a did-you-mean (format_error, here).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import did_you_mean
from .benchmark import BenchmarkSpec
from .cost import CostSettings
from .tables import (BASELINE_AXES, PROFILE_KEYS, PROFILE_RUN_KEYS, EnvironmentSpec,
                     HistorySettings, MatrixSpec, ReportSettings, RunSettings)
from .workloads import BASE, WorkloadSpec
from .values import (AXES, AXIS_CHECKS, IMAGE_REFERENCE, MAX_REPEATS, MAX_RUNS, MAX_SEED,
                     MAX_TIMEOUT_S, NAME, PROTECTED_ENV, PROTECTED_ENV_NAMES, RUN_NAME_PATTERN,
                     axis_check, check_axis, is_image_reference, protected_env, shown)

__all__ = ["AXES", "AXIS_CHECKS", "BASELINE_AXES", "IMAGE_REFERENCE", "MAX_REPEATS", "MAX_RUNS",
           "MAX_SEED", "MAX_TIMEOUT_S", "NAME", "PROFILE_KEYS", "PROFILE_RUN_KEYS",
           "PROTECTED_ENV", "PROTECTED_ENV_NAMES", "RUN_NAME_PATTERN", "BenchmarkSpec",
           "CostSettings", "EnvironmentSpec", "HistorySettings", "MatrixSpec", "ReportSettings",
           "RunSettings",
           "WorkloadSpec",
           "axis_check", "check_axis", "format_error", "is_image_reference", "protected_env",
           "shown", "validate"]

# --- error formatting -------------------------------------------------------------------------

_EXPECTED = {"int_type": "a whole number", "string_type": "a string", "bool_type": "true or false",
             "float_type": "a number", "dict_type": "a table", "list_type": "a list",
             "model_type": "a table"}


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are valid at `loc` (for did-you-mean on unknown keys)."""
    model: type[BaseModel] | None = MatrixSpec
    path = list(loc)
    while path and model is not None:
        key = path.pop(0)
        if model is MatrixSpec and key == "run":
            model = RunSettings
        elif model is MatrixSpec and key == "report":
            model = ReportSettings
        elif model is MatrixSpec and key == "cost":
            model = CostSettings
        elif model is MatrixSpec and key in ("environments", "benchmarks", "workloads"):
            tables: dict[str, type[BaseModel]] = {
                "environments": EnvironmentSpec, "benchmarks": BenchmarkSpec,
                "workloads": WorkloadSpec}
            model = tables[key]
            if path:
                path.pop(0)  # the environment name or the benchmark index
        else:
            return model
    return model


def format_error(error: Mapping[str, Any]) -> str:
    """One pydantic error → "key.path: message"."""
    loc = tuple(error["loc"])
    kind = error["type"]
    where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
    value = error.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        hint = did_you_mean(loc[-1], model.model_fields) if model else ""
        return f"{where}: unknown key{hint}"
    if kind == "missing":
        return f"{where}: missing required key"
    if kind == "literal_error":
        expected = error["ctx"]["expected"]
        choices = [c.strip().strip("'") for c in expected.replace(" or ", ", ").split(",")]
        return f"{where}: {shown(value)} is not one of {expected}{did_you_mean(value, choices)}"
    if kind in ("greater_than", "greater_than_equal"):
        return f"{where}: must be {'>' if kind == 'greater_than' else '>='} " \
               f"{error['ctx'].get('gt', error['ctx'].get('ge'))}, got {shown(value)}"
    if kind in ("less_than", "less_than_equal"):
        return f"{where}: must be {'<' if kind == 'less_than' else '<='} " \
               f"{error['ctx'].get('lt', error['ctx'].get('le'))}, got {shown(value)}"
    if kind == "finite_number":
        return f"{where}: must be a finite number, got {shown(value)}"
    if kind == "too_short":
        return f"{where}: must not be empty"
    if kind == "string_pattern_mismatch":
        return f"{where}: {shown(value)} must be letters, digits, '.', '_' or '-' (it names a folder " \
               f"under results/)"
    if kind in _EXPECTED:
        return f"{where}: expected {_EXPECTED[kind]}, got {type(value).__name__} {shown(value)}"
    if kind == "value_error":
        message = str(error["ctx"]["error"])
        if message.startswith("."):         # the message goes on with the key path
            return f"{where}{message}"
        return f"{where}: {message}" if where else message
    return f"{where}: {error['msg']}"


def validate(raw: dict[str, Any], matrix_folder: Path | None = None) -> MatrixSpec:
    """Validate a parsed matrix; raises ValueError with one line for the first problem. A user
    workload's file is relative to `matrix_folder` (the working folder when None)."""
    try:
        return MatrixSpec.model_validate(raw, context={BASE: matrix_folder})
    except ValidationError as exc:
        raise ValueError(format_error(exc.errors()[0])) from None
