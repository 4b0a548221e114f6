"""The matrix's tables ([run], [environments.*], [history], [report], [profiles.*]) and the
whole matrix (MatrixSpec), each a strict pydantic model; [[benchmarks]] is benchmark.py's."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt,
                      ValidationInfo, field_validator, model_validator)

from .. import settings
from ..errors import did_you_mean
from ..worker import catalog
from .benchmark import BenchmarkSpec, check_option
from .profiling import ProfilingSettings
from .tuning import TuningSettings
from .cost import CostSettings
from .values import (AXES, CHANNELS, ENV_NAME, MAX_REPEATS, MAX_RUNS, MAX_SEED, MAX_TIMEOUT_S,
                     NAME, RUN_NAME_PATTERN, Strict, backend_problem, check_axis,
                     check_build_date, check_image, check_lock_clocks, check_parallel,
                     check_run_name, check_stack, check_steps, is_image_reference, loader_env,
                     no_control, protected_env, shown)
from .workloads import WorkloadSpec, read_workloads

class RunSettings(Strict):
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

    @field_validator("name", mode="after")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_run_name(value)

    @field_validator("lock_clocks", mode="after")
    @classmethod
    def _lock_clocks(cls, value: Any) -> bool | int:
        return check_lock_clocks(value)

    @field_validator("steps", mode="after")
    @classmethod
    def _steps(cls, value: Any) -> int | str:
        return check_steps(value)

    @field_validator("parallel", mode="after")
    @classmethod
    def _parallel(cls, value: Any) -> int | str:
        return check_parallel(value)

    @model_validator(mode="after")
    def _time_window(self) -> RunSettings:
        if self.min_time > self.max_time:
            raise ValueError(f"run.min_time ({self.min_time:g} s) is above run.max_time "
                             f"({self.max_time:g} s)")
        return self


# Keys a [profiles.*] table may override: any [run] key but name/profile, and any benchmark axis.
PROFILE_RUN_KEYS = tuple(k for k in RunSettings.model_fields if k not in ("name", "profile"))
PROFILE_KEYS = PROFILE_RUN_KEYS + AXES


class EnvironmentSpec(Strict):
    # Where the environment comes from: an image folder images/<image>/ (its lock becomes a local
    # venv or a Docker image), a registry image by digest (REGISTRY/NAME@sha256:…, run in
    # Docker), or an existing interpreter used as it is (a VM's preinstalled stack, a conda
    # environment), like asv's "existing" environments.
    image: str | None = Field(None, min_length=1)
    python: str | None = Field(None, min_length=1)
    api: Literal[catalog.APIS]  # type: ignore[valid-type]
    backend: Literal[catalog.KERAS_BACKENDS] | None = None  # type: ignore[valid-type]
    env: dict[str, str] = Field(default_factory=dict)
    # true: `env` may set what decides the worker's code (PYTHON*, LD_*, PATH) or makes a shell
    # wrapper or the C library load code (BASH_ENV, BASH_FUNC_*, GCONV_PATH, …: values.py). A
    # matrix is code then: run only one you trust.
    unsafe_env: bool = False
    # A derived stack (image folders only): `pins` replace the requirement of their name in the
    # folder's requirements*.in (or add it; `keras @ ../keras`: a local wheel or tree), `packages`
    # add distributions; resolved into a hash-locked lock of its own (environments/stacks.py).
    pins: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)
    # `channel = "nightly"`: the newest nightly build of what `follow` names (default: the
    # framework under test); `date`: that day's build (environments/channels.py).
    channel: Literal[CHANNELS] | None = None  # type: ignore[valid-type]
    date: str | None = None
    follow: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _stack(self) -> EnvironmentSpec:
        if not self.derived and self.follow:
            raise ValueError("follow names what follows a channel: set channel = 'nightly'")
        if not self.derived:
            return self
        if self.image is None or is_image_reference(self.image):
            where = "an existing interpreter" if self.image is None else "an image named by digest"
            raise ValueError(f"pins and packages derive a stack from an image folder (image = "
                             f"'<folder under images/>'), as a channel does, not from {where}")
        check_stack(self.pins, self.packages, self.follow)
        return self

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        return check_build_date(value)

    @property
    def channel_name(self) -> str | None:
        return self.channel or ("nightly" if self.date else None)

    @property
    def derived(self) -> bool:
        return bool(self.pins or self.packages or self.channel_name)

    @property
    def stack_pins(self) -> tuple[str, ...]:
        """The pins, then the channel (its day, what follows it), as a cell's id holds them."""
        follows = ", ".join(self.follow) or "the framework"
        return (*self.pins, *([f"channel {self.channel_name} {self.date or 'newest'}: {follows}"]
                              if self.channel_name else []))

    @field_validator("image", mode="after")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return check_image(no_control(value))

    @field_validator("python", mode="after")
    @classmethod
    def _python(cls, value: str | None) -> str | None:
        return no_control(value)

    @field_validator("env", mode="after")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not ENV_NAME.match(name):
                raise ValueError(f"{shown(name)}: a variable name is letters, digits and '_', "
                                 f"not starting with a digit (no '=', NUL or space)")
            if "\0" in value:
                raise ValueError(f"{name}: the value holds a NUL character")
            if not value.isprintable():
                raise ValueError(f"{name}: {shown(value)} holds a control character (an escape "
                                 "sequence, a newline, …)")
        return env

    @model_validator(mode="after")
    def _protected_env(self) -> EnvironmentSpec:
        if self.unsafe_env:
            return self
        protected = [name for name in self.env if protected_env(name)]
        if protected:
            raise ValueError(f"env.{protected[0]}: PYTHON*, LD_* and PATH decide which code the "
                             f"worker runs; set unsafe_env = true on this environment to allow it")
        loaders = [name for name, value in self.env.items() if loader_env(name, value)]
        if loaders:
            raise ValueError(f"env.{loaders[0]}: makes a shell wrapper, another interpreter or "
                             "the C library load code or files of its choosing (BASH_ENV, "
                             "BASH_FUNC_*, GCONV_PATH, … as sudo and glibc drop them); set "
                             "unsafe_env = true on this environment to allow it")
        return self

    @model_validator(mode="after")
    def _backend_only_with_keras(self) -> EnvironmentSpec:
        if (self.image is None) == (self.python is None):
            raise ValueError("give image = '<folder under images/>' or python = "
                             "'/path/to/python' (an existing interpreter), exactly one of them")
        problem = backend_problem(self.api, self.backend)
        if problem:
            raise ValueError(problem)
        return self


class HistorySettings(Strict):
    # Where every finished run is recorded: an SQLAlchemy URL (sqlite:///path,
    # postgresql://user@host/db), unless the host sets DL_BENCH_HISTORY_URL (the host's wins: a
    # shared matrix must not choose which database this host writes). Unset: beside the run
    # folders, results/history.sqlite.
    url: str | None = Field(None, min_length=1)

    @field_validator("url", mode="after")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        no_control(value)
        if value is not None:
            try:
                settings.history_url(value)    # the one judge of a URL, the host's setting's
            except ValueError as exc:
                raise ValueError(f"{settings.password_hidden(value)!r}: expected {exc}") from None
        return value


# Axes an effect can be measured against (a task is different work, not a setting of it).
BASELINE_AXES = tuple(a for a in AXES if a != "task")


class ReportSettings(Strict):
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


class MatrixSpec(Strict):
    run: RunSettings = Field(default_factory=RunSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    cost: CostSettings | None = None      # [cost]: the VM's price, the budget (schema/cost.py)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    profiling: ProfilingSettings = Field(default_factory=ProfilingSettings)
    tuning: TuningSettings = Field(default_factory=TuningSettings)   # [tuning]: schema/tuning.py
    workloads: dict[str, WorkloadSpec] = Field(default_factory=dict)   # before the benchmarks
    environments: dict[str, EnvironmentSpec] = Field(min_length=1)
    benchmarks: list[BenchmarkSpec] = Field(min_length=1)

    @field_validator("workloads", mode="after")
    @classmethod
    def _workloads(cls, workloads: dict[str, WorkloadSpec],
                   info: ValidationInfo) -> dict[str, WorkloadSpec]:
        return read_workloads(workloads, info)

    def workload(self, name: str) -> catalog.Workload:
        """A benchmark's workload: the matrix's own, else the catalog's."""
        return self.workloads[name].read.workload if name in self.workloads \
            else catalog.WORKLOADS[name]

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
    def _environment_names(self) -> MatrixSpec:
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
    def _baseline_options(self) -> MatrixSpec:
        """A baseline option must be an option of a workload of the matrix, of its type."""
        workloads = [self.workload(b.workload) for b in self.benchmarks]
        known = {name: w.options[name] for w in workloads for name in w.options}
        for name, value in (self.report.baselines.get("options") or {}).items():
            where = f"report.baselines.options.{name if name.isprintable() else shown(name)}"
            if name not in known:
                raise ValueError(f"{where}: no workload of this matrix has that option"
                                 f"{did_you_mean(name, known)}")
            check_option(where, known[name], value)
        return self

    @model_validator(mode="after")
    def _bounded(self) -> MatrixSpec:
        runs = 0
        for bench in self.benchmarks:
            names = len(self.environments) if "*" in bench.environments \
                else len(bench.environments)
            runs += bench.cell_count(names) * (bench.repeats or self.run.repeats)
        if runs > MAX_RUNS:
            raise ValueError(f"benchmarks: {runs} runs (cells × repeats); at most {MAX_RUNS} "
                             f"in one matrix (split it, or use --only)")
        return self


