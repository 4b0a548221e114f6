"""The matrix schema: the one definition of what matrix.toml may contain.

Structure and types are pydantic models (strict: no silent coercion, unknown keys rejected);
the values of the benchmark axes come from runner.worker.catalog, which the worker shares.
Every error becomes one line: "<file>: <key path>: <what is wrong>" with a did-you-mean.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt,
                      PositiveFloat, PositiveInt, ValidationError, create_model, field_validator,
                      model_validator)

from .errors import did_you_mean
from .worker import catalog

RUN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# Environment names become columns, file names and log lines: the same safe pattern.
NAME = re.compile(RUN_NAME_PATTERN)

# Bounds, each with a one-line error: what no real matrix needs and what would make planning or
# a run unbounded (repeats = 2**63 - 1 planned forever), or break a timer (timeout = inf).
MAX_REPEATS = 1000
MAX_RUNS = 100_000              # cells × repeats of one matrix
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # one cell attempt: a week
MAX_SEED = 2**32 - 1             # every framework's seed fits 32 bits

# Variables a matrix's `env` may not set unless the environment says unsafe_env = true: they
# decide which code the worker's interpreter loads (PYTHONPATH, PYTHONSTARTUP, LD_PRELOAD, PATH).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROTECTED_ENV = ("PYTHON", "LD_")
PROTECTED_ENV_NAMES = ("PATH",)


def protected_env(name: str) -> bool:
    upper = name.upper()
    return upper in PROTECTED_ENV_NAMES or upper.startswith(PROTECTED_ENV)


def shown(value: Any, limit: int = 200) -> str:
    """repr(value), cut to `limit` characters: an error line stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
# An image in a registry, named by its content: REGISTRY/NAME@sha256:<64 hex digits>. A tag can
# move; a digest names exactly one image, so a run (and its reproduction) gets what it asked for.
# Without a registry host the name is Docker Hub's, as for `docker pull`.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(rf"^(?P<repository>(?:[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]+)?/)?"
                             rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                             r"@(?P<digest>sha256:[0-9a-f]{64})$")


def is_image_reference(image: str) -> bool:
    """A registry reference (a digest or a tag) rather than a folder under images/: folder names
    hold neither '@' nor ':'."""
    return "@" in image or ":" in image


def _image(value: str | None) -> str | None:
    if value is not None and is_image_reference(value) and not IMAGE_REFERENCE.match(value):
        raise ValueError(f"{shown(value)}: name a registry image by its digest, "
                         f"REGISTRY/NAME@sha256:<64 hex digits> (a tag can move), or give an "
                         f"image folder under images/")
    return value


def _one_of(choices: tuple[Any, ...]):
    def check(value: Any) -> Any:
        if isinstance(value, bool) or value not in choices:
            listed = ", ".join(repr(c) for c in choices)
            raise ValueError(f"{shown(value)} is not one of {listed}{did_you_mean(value, choices)}")
        return value
    return check


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {shown(value)}")
    if value <= 0:
        raise ValueError(f"must be a positive whole number, got {value}")
    return value


def _steps(value: Any) -> int | str:
    """Timed steps: a positive whole number or "auto"."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"expected a positive whole number or \"auto\", got {shown(value)}"
                     f"{did_you_mean(value, ('auto',)) if isinstance(value, str) else ''}")


def _parallel(value: Any) -> int | str:
    """Cells at once: a positive whole number or "auto" (one per GPU)."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"expected a positive whole number or \"auto\" (one cell per GPU), got "
                     f"{shown(value)}{did_you_mean(value, ('auto',)) if isinstance(value, str) else ''}")


def _lock_clocks(value: Any) -> bool | int:
    """false, true (the TDP, i.e. base, clock) or an SM clock in MHz."""
    if isinstance(value, bool) or (isinstance(value, int) and 0 < value < 100_000):
        return value
    raise ValueError(f"expected false, true (lock at the GPU's base clock) or a clock in MHz, "
                     f"got {value!r}")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


def _bool_or_one_of(choices: tuple[Any, ...]):
    def check(value: Any) -> bool | str:
        if isinstance(value, bool):
            return value
        return _one_of(choices)(value) if isinstance(value, str) else _boolean(value)
    return check


def axis_check(axis: catalog.Axis):
    """The check of one value of an axis, by the kind the catalog declares."""
    if axis.kind == "choice":
        return _one_of(axis.values)
    if axis.kind == "bool_or_choice":
        return _bool_or_one_of(axis.values)
    return {"bool": _boolean, "positive_int": _positive_int}[axis.kind]


# Every axis a benchmark may vary (runner.worker.catalog declares them), with the check for one
# value. A list of values yields one cell per value (cartesian product across axes).
AXIS_CHECKS = {name: axis_check(axis) for name, axis in catalog.AXES.items()}
AXES = tuple(AXIS_CHECKS)


def check_axis(name: str, value: Any) -> tuple[Any, ...]:
    """A scalar or a non-empty list of valid values → a tuple of values."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("empty list: give at least one value")
    checked = tuple(AXIS_CHECKS[name](v) for v in values)
    if len(set(map(repr, checked))) != len(checked):
        raise ValueError(f"repeated value in {shown(value)}")
    return checked


class _Strict(BaseModel):
    # allow_inf_nan=False: TOML has inf and nan, and no setting means either.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _no_control(value: str | None) -> str | None:
    if value is not None and any(not c.isprintable() for c in value):
        raise ValueError(f"{shown(value)} holds a control character (a newline, NUL, …)")
    return value


class RunSettings(_Strict):
    name: str = Field("run", pattern=RUN_NAME_PATTERN)
    repeats: PositiveInt = Field(3, le=MAX_REPEATS)
    warmup_steps: PositiveInt = 2
    # Timed steps per repeat: a number, or "auto" (the default): the timed window runs until it
    # holds at least 10 samples and lasts min_time seconds, or until max_time.
    steps: Any = "auto"
    min_time: PositiveFloat = 1.0
    max_time: PositiveFloat = 60.0
    timeout: PositiveFloat = Field(1800.0, le=MAX_TIMEOUT_S)
    executor: Literal["auto", "local", "docker", "ray"] = "auto"
    # Cells at once: "auto" runs one cell per GPU (every GPU of the VM, or of the Ray cluster,
    # busy), each pinned to its GPU; a number caps that; 1 runs one cell at a time. CPU cells
    # (device = "cpu", or a host without GPUs) always run one at a time, alone.
    parallel: Any = "auto"
    profile: Literal["auto", "full", "smoke"] = "auto"
    seed: NonNegativeInt = Field(0, le=MAX_SEED)
    # Add matmul calibration cells (float32 and bfloat16, the largest size) in every environment:
    # the fastest of them per device and precision is the measured peak that fraction_of_peak
    # divides by (never a datasheet figure).
    calibrate: bool = False
    # false: JAX and TensorFlow allocate device memory as they need it instead of grabbing most of
    # the GPU at start, so VRAM figures compare fairly (torch's caching allocator never
    # preallocates). Each result records the allocator settings in force.
    preallocate: bool = True
    # false: the local executor gives every worker process empty compilation caches (inductor,
    # Triton, CUDA's PTX cache) in its attempt folder, so compile_s is cold in every repeat, as
    # in a new container; true: workers share the user's caches, warm from earlier runs and
    # repeats. Each record says which (compile_cache = "fresh" | "kept").
    keep_compile_caches: bool = False
    # Before every GPU cell, wait up to `settle` seconds (0: not at all) for a quiet GPU: no
    # other compute process, utilisation about 0, temperature at most settle_temperature (°C).
    # The wait and the start temperature are in the cell's record; a cell that started without
    # a quiet GPU says why in the report.
    settle: NonNegativeFloat = 60.0
    settle_temperature: PositiveFloat = 60.0
    # Lock the GPUs' clocks for the run (NVML's locked clocks; needs root): true at the TDP
    # (base) clock, or a clock in MHz; reset when the run ends. Recorded in the manifest and in
    # every GPU record (gpu_locked_clocks, which decides comparability).
    lock_clocks: Any = False

    @field_validator("lock_clocks", mode="after")
    @classmethod
    def _lock_clocks(cls, value: Any) -> bool | int:
        return _lock_clocks(value)

    @field_validator("steps", mode="after")
    @classmethod
    def _steps(cls, value: Any) -> int | str:
        return _steps(value)

    @field_validator("parallel", mode="after")
    @classmethod
    def _parallel(cls, value: Any) -> int | str:
        return _parallel(value)

    @model_validator(mode="after")
    def _time_window(self) -> "RunSettings":
        if self.min_time > self.max_time:
            raise ValueError(f"run.min_time ({self.min_time:g} s) is above run.max_time "
                             f"({self.max_time:g} s)")
        return self


# Keys a [profiles.*] table may override: any [run] key but name/profile, and any benchmark axis.
PROFILE_RUN_KEYS = tuple(k for k in RunSettings.model_fields if k not in ("name", "profile"))
PROFILE_KEYS = PROFILE_RUN_KEYS + AXES


class EnvironmentSpec(_Strict):
    # Where the environment comes from: an image folder images/<image>/ (its lock becomes a local
    # venv or a Docker image), a registry image by digest (REGISTRY/NAME@sha256:…, run in
    # Docker), or an existing interpreter used as it is (a VM's preinstalled stack, a conda
    # environment), like asv's "existing" environments.
    image: str | None = Field(None, min_length=1)
    python: str | None = Field(None, min_length=1)
    api: Literal[catalog.APIS]  # type: ignore[valid-type]
    backend: Literal[catalog.KERAS_BACKENDS] | None = None  # type: ignore[valid-type]
    env: dict[str, str] = Field(default_factory=dict)
    # true: `env` may set what decides the worker's code (PYTHON*, LD_*, PATH). A matrix is code
    # then: run only one you trust.
    unsafe_env: bool = False

    @field_validator("image", mode="after")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return _image(_no_control(value))

    @field_validator("python", mode="after")
    @classmethod
    def _python(cls, value: str | None) -> str | None:
        return _no_control(value)

    @field_validator("env", mode="after")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not ENV_NAME.match(name):
                raise ValueError(f"{shown(name)}: a variable name is letters, digits and '_', "
                                 f"not starting with a digit (no '=', NUL or space)")
            if "\0" in value:
                raise ValueError(f"{name}: the value holds a NUL character")
        return env

    @model_validator(mode="after")
    def _protected_env(self) -> "EnvironmentSpec":
        protected = [name for name in self.env if protected_env(name)]
        if protected and not self.unsafe_env:
            raise ValueError(f"env.{protected[0]}: PYTHON*, LD_* and PATH decide which code the "
                             f"worker runs; set unsafe_env = true on this environment to allow it")
        return self

    @model_validator(mode="after")
    def _backend_only_with_keras(self) -> "EnvironmentSpec":
        if (self.image is None) == (self.python is None):
            raise ValueError("give image = '<folder under images/>' or python = "
                             "'/path/to/python' (an existing interpreter), exactly one of them")
        if self.api == "keras" and self.backend is None:
            raise ValueError("api = 'keras' needs backend = 'tensorflow' | 'jax' | 'torch'")
        if self.api != "keras" and self.backend is not None:
            raise ValueError(f"backend applies to api = 'keras' only, not {self.api!r}")
        return self


def _tasks(workload: catalog.Workload, tasks: tuple[str, ...] | None) -> tuple[str, ...]:
    """A benchmark's tasks: its workload's one task when it names none."""
    if tasks is None:
        if len(workload.tasks) != 1:
            raise ValueError(f"task: {workload.name} needs one of {', '.join(workload.tasks)}")
        return workload.tasks
    for task in tasks:
        if task not in workload.tasks:
            raise ValueError(f"task: {workload.name} has no task {shown(task)} "
                             f"(it has {', '.join(workload.tasks)})")
    return tasks


def _option_type_error(where: str, option: catalog.Option, value: Any) -> str | None:
    expected = (int, float) if option.type is float else option.type
    if isinstance(value, bool) != (option.type is bool) or not isinstance(value, expected):
        return f"{where}: expected {option.type.__name__}, got {shown(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: must be a finite number, got {value}"
    return None


def _check_option(where: str, option: catalog.Option, value: Any) -> None:
    problem = _option_type_error(where, option, value)
    if problem is None and isinstance(value, str) and any(not c.isprintable() for c in value):
        problem = f"{where}: {shown(value)} holds a control character"
    if problem is None and option.positive and value <= 0:
        problem = f"{where}: must be positive, got {value}"
    if problem is not None:
        raise ValueError(problem)


class _Benchmark(_Strict):
    """A [[benchmarks]] table but its axes: BenchmarkSpec adds one field per axis."""

    workload: Literal[tuple(catalog.WORKLOADS)]  # type: ignore[valid-type]
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

    @field_validator(*AXES, mode="after", check_fields=False)
    @classmethod
    def _axis(cls, value: Any, info) -> Any:
        return None if value is None else check_axis(info.field_name, value)

    @field_validator("steps", mode="after")
    @classmethod
    def _steps(cls, value: Any) -> int | str | None:
        return None if value is None else _steps(value)

    @model_validator(mode="after")
    def _against_workload(self) -> "_Benchmark":
        workload = catalog.WORKLOADS[self.workload]
        self.task = _tasks(workload, self.task)  # type: ignore[attr-defined]
        if self.batch_size is None:  # type: ignore[attr-defined]
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
            for value in values:
                _check_option(f"options.{key}", option, value)
        return self

    def cell_count(self, environments: int) -> int:
        """Cells this benchmark expands to, counted without expanding it."""
        options = math.prod(len(v) if isinstance(v, list) else 1 for v in self.options.values())
        return environments * options * math.prod(len(self.axis_values(a)) for a in AXES)

    def option_grid(self) -> list[dict[str, Any]]:
        """Every combination of list-valued options (one dict per cell)."""
        keys = list(self.options)
        lists = [v if isinstance(v, list) else [v] for v in self.options.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*lists)]

    def axis_values(self, name: str) -> tuple[Any, ...]:
        value = getattr(self, name)
        return value if value is not None else (catalog.AXIS_DEFAULTS[name],)


# Axes: one field per axis of the catalog, a value or a list of values (tuples of values after
# validation); None: the axis's default.
BenchmarkSpec = create_model("BenchmarkSpec", __base__=_Benchmark, __module__=__name__,
                             **{name: (Any, None) for name in AXES})


class HistorySettings(_Strict):
    # Where every finished run is recorded: an SQLAlchemy URL (sqlite:///path,
    # postgresql://user@host/db). Unset: DL_BENCH_HISTORY_URL, else results/history.sqlite.
    url: str | None = Field(None, min_length=1)

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(sqlite|postgresql)(\+\w+)?://", value):
            raise ValueError(f"{value!r}: expected an SQLAlchemy URL, sqlite:///PATH or "
                             "postgresql://USER@HOST[:PORT]/DATABASE")
        return value


# Axes an effect can be measured against (a task is different work, not a setting of it).
BASELINE_AXES = tuple(a for a in AXES if a != "task")


class ReportSettings(_Strict):
    # The value each axis's effects are measured against, e.g. { jit = false, precision =
    # "float32", options.n = 1024 }; an axis not named here: its first value in the matrix.
    baselines: dict[str, Any] = Field(default_factory=dict)
    # The environment every other one is measured against, row by row; unset: the first.
    baseline_environment: str | None = Field(None, min_length=1)

    @field_validator("baselines", mode="after")
    @classmethod
    def _baselines(cls, baselines: dict[str, Any]) -> dict[str, Any]:
        for key, value in baselines.items():
            if not key.isprintable():
                raise ValueError(f"report.baselines: {shown(key)} holds a control character")
            if key == "options":
                if not isinstance(value, dict):
                    raise ValueError("report.baselines.options: expected a table of option "
                                     "values, e.g. options.n = 1024")
                continue
            if key not in BASELINE_AXES:
                raise ValueError(f"report.baselines.{key}: not an axis"
                                 f"{did_you_mean(key, BASELINE_AXES + ('options',))}")
            if isinstance(value, list):
                raise ValueError(f"report.baselines.{key}: one value, not a list")
            try:
                check_axis(key, value)
            except ValueError as exc:
                raise ValueError(f"report.baselines.{key}: {exc}") from None
        return baselines


class MatrixSpec(_Strict):
    run: RunSettings = Field(default_factory=RunSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    environments: dict[str, EnvironmentSpec] = Field(min_length=1)
    benchmarks: list[BenchmarkSpec] = Field(min_length=1)

    @field_validator("profiles", mode="after")
    @classmethod
    def _profiles(cls, profiles: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, overrides in profiles.items():
            if name not in ("full", "smoke"):
                raise ValueError(f"profiles.{name}: unknown profile (use 'full' or 'smoke')"
                                 f"{did_you_mean(name, ('full', 'smoke'))}")
            for key, value in overrides.items():
                where = f"profiles.{name}.{key}"
                if key not in PROFILE_KEYS:
                    raise ValueError(f"{where}: not a [run] key or benchmark axis"
                                     f"{did_you_mean(key, PROFILE_KEYS)}")
                if key in AXES:
                    try:
                        check_axis(key, value)
                    except ValueError as exc:
                        raise ValueError(f"{where}: {exc}") from None
        return profiles

    @field_validator("environments", mode="after")
    @classmethod
    def _safe_names(cls, environments: dict[str, EnvironmentSpec]) -> dict[str, EnvironmentSpec]:
        for name in environments:
            if not NAME.match(name):
                raise ValueError(f"{shown(name)}: an environment name must be letters, digits, "
                                 f"'.', '_' or '-' (at most 64; it names columns and files)")
        return environments

    @model_validator(mode="after")
    def _environment_names(self) -> "MatrixSpec":
        for index, bench in enumerate(self.benchmarks):
            for name in bench.environments:
                if name != "*" and name not in self.environments:
                    raise ValueError(f"benchmarks[{index}].environments: unknown environment "
                                     f"{shown(name)}{did_you_mean(name, self.environments)}")
        baseline = self.report.baseline_environment
        if baseline is not None and baseline not in self.environments:
            raise ValueError(f"report.baseline_environment: unknown environment {shown(baseline)}"
                             f"{did_you_mean(baseline, self.environments)}")
        return self

    @model_validator(mode="after")
    def _baseline_options(self) -> "MatrixSpec":
        """A baseline option must be an option of a workload of the matrix, of its type."""
        workloads = [catalog.WORKLOADS[b.workload] for b in self.benchmarks]
        known = {name: w.options[name] for w in workloads for name in w.options}
        for name, value in (self.report.baselines.get("options") or {}).items():
            where = f"report.baselines.options.{name if name.isprintable() else shown(name)}"
            if name not in known:
                raise ValueError(f"{where}: no workload of this matrix has that option"
                                 f"{did_you_mean(name, known)}")
            problem = _option_type_error(where, known[name], value)
            if problem is not None:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _bounded(self) -> "MatrixSpec":
        runs = 0
        for bench in self.benchmarks:
            names = len(self.environments) if "*" in bench.environments \
                else len(bench.environments)
            runs += bench.cell_count(names) * (bench.repeats or self.run.repeats)
        if runs > MAX_RUNS:
            raise ValueError(f"benchmarks: {runs} runs (cells × repeats); at most {MAX_RUNS} "
                             f"in one matrix (split it, or use --only)")
        return self


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
        elif model is MatrixSpec and key in ("environments", "benchmarks"):
            model = EnvironmentSpec if key == "environments" else BenchmarkSpec
            if path:
                path.pop(0)  # the environment name or the benchmark index
        else:
            return model
    return model


def format_error(error: dict[str, Any]) -> str:
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
        return f"{where}: {message}" if where else message
    return f"{where}: {error['msg']}"


def validate(raw: dict[str, Any]) -> MatrixSpec:
    """Validate a parsed matrix; raises ValueError with one line for the first problem."""
    try:
        return MatrixSpec.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(format_error(exc.errors()[0])) from None
