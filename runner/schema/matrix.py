"""matrix.toml → validated Matrix → cells (one per point of the matrix, with a stable id)."""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import math
import os
import shutil
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import schema
from ..errors import UsageError
from ..paths import IMAGES_DIR
from ..version import method_version
from ..worker import catalog, protocol
from .axes import Axes
from .user_workloads import UserWorkload


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: environment × workload × task × batch size × every axis."""

    environment: str
    api: str
    backend: str | None
    image: str | None               # images/<image>/, or None for an existing interpreter
    workload: str
    task: str
    batch_size: int
    axes: Axes                      # every axis of catalog.setting_axes(), in its order
    options: dict[str, Any]         # size presets merged with the benchmark's options
    env: dict[str, str]
    steps: int | str                # or "auto"
    warmup_steps: int
    repeats: int
    timeout: float
    not_applicable: str | None = None
    python: str | None = None       # an existing interpreter (environments.<name>.python)
    # A derived stack: the pins and packages changing the image folder's requirements.
    pins: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    # The settings its worker reads: one value per `setting` field of the cell spec
    # (runner/worker/protocol.py declares them, with their defaults and [run] keys), copied into
    # the spec as they are; those the declaration marks as coordinates change the cell's id.
    settings: dict[str, Any] = field(default_factory=protocol.settings_from)
    keep_compile_caches: bool = False         # [run] keep_compile_caches (not a coordinate)
    settle_s: float = 0.0                     # [run] settle: the wait for a quiet GPU (idem)
    settle_temp_c: float = 60.0               # [run] settle_temperature
    # The report checks its answer against its row's ([[benchmarks]] check_answers; no coordinate).
    check_answers: bool = True
    # A user's workload ([workloads.<name>]): its code's digest is a coordinate, not its path.
    user_workload: UserWorkload | None = None
    tuning: dict[str, Any] = field(default_factory=dict)    # knobs: a coordinate, where any

    @property
    def coordinates(self) -> dict[str, Any]:
        where: dict[str, Any] = {"image": self.image} if self.python is None \
            else {"python": self.python}
        if self.pins or self.packages:
            where.update(pins=list(self.pins), packages=list(self.packages))
        calibration = protocol.coordinate_settings(self.settings)
        if self.user_workload is not None:
            calibration["workload_sha256"] = self.user_workload.sha256
        calibration.update({"tuning": self.tuning} if self.tuning else {})   # tier = tuned
        return {"environment": self.environment, "api": self.api, "backend": self.backend,
                **where, "workload": self.workload, "task": self.task,
                "batch_size": self.batch_size, **self.axes, "options": self.options,
                "env": self.env, **calibration}

    @property
    def method_version(self) -> str:
        """The digest of the worker code it runs and the timing method (runner/version.py)."""
        return method_version(self.api, self.workload, self.backend, bool(self.user_workload))

    @functools.cached_property      # computed once: a plan of 10 000 cells asks for it often
    def id(self) -> str:
        """Short hash of the coordinates (the worker's variables included) and of its method
        version: the same cell measured the same way gets the same id in every run, whatever
        changed in other cells' code; records of a changed method are never pooled with it."""
        blob = json.dumps({**self.coordinates, "method_version": self.method_version},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    @property
    def option_defaults(self) -> dict[str, Any]:
        """The options a benchmark that sets none runs with: a user workload's defaults, or
        the size preset of a built-in one."""
        if self.user_workload is not None:
            return self.user_workload.defaults
        return catalog.default_sizes(self.workload, self.axes.size)

    @property
    def name(self) -> str:
        """Readable name: workload-task-environment-b<batch>, plus every non-default axis and
        every option that differs from the size preset."""
        parts = [self.workload, self.task, self.environment, f"b{self.batch_size}"]
        for key, value in self.axes.items():
            if value != catalog.AXIS_DEFAULTS[key]:
                short = catalog.AXES[key].short
                label = key if short is None else short
                text = str(value).lower()
                parts.append(f"{label}={text}" if label else text)
        preset = self.option_defaults
        parts += [f"{k}={str(v).lower()}" for k, v in self.options.items() if preset.get(k) != v]
        return "-".join(parts)


@dataclass
class Matrix:
    path: Path
    spec: schema.MatrixSpec
    profile: str                     # the profile in force: "full" or "smoke"
    profile_reason: str              # why ("--profile smoke", "auto: no GPU found", ...)
    resolved: dict[str, Any] = field(default_factory=dict)  # the TOML data after profile overrides
    cells: list[Cell] = field(default_factory=list)
    calibration: list[Cell] = field(default_factory=list)   # [run] calibrate: the peak's cells
    # Benchmarks whose `profiles` leave out the profile in force: index → the cells they have.
    left_out: dict[int, int] = field(default_factory=dict)

    @property
    def user_workloads(self) -> list[UserWorkload]:
        """The [workloads.*] the matrix declares, read from their files."""
        return [w.read for w in self.spec.workloads.values()]


MAX_MATRIX_BYTES = 16 << 20     # a matrix is a page of settings; a bigger file is no matrix


def read_toml(path: Path) -> dict[str, Any]:
    try:
        # O_NONBLOCK: a FIFO in the matrix's place cannot hang the open (nor the read).
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise UsageError(f"{path}: is a folder, not a matrix file")
            if not stat.S_ISREG(mode):
                raise UsageError(f"{path}: not a regular file (a FIFO, a device, a socket); a "
                                 "matrix is a file")
            data = handle.read(MAX_MATRIX_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_MATRIX_BYTES:
        raise UsageError(f"{path}: larger than {MAX_MATRIX_BYTES >> 20} MB; not a matrix file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}: "
                         f"{data[exc.start:exc.start + 1]!r}); TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply (arrays or tables inside each other)") \
            from None


def choose_profile(raw: dict[str, Any], requested: str | None, gpu_found: bool) -> tuple[str, str]:
    run = raw.get("run", {}) if isinstance(raw.get("run"), dict) else {}
    wanted = requested or run.get("profile", "auto")
    if wanted not in ("auto", "full", "smoke"):
        wanted = "auto"                 # not a profile: the schema says so about run.profile
    if wanted == "auto":
        return ("full", "auto: a GPU was found") if gpu_found else (
            "smoke", "auto: no GPU found, so the smoke profile is in force")
    source = "--profile" if requested else "[run] profile"
    return wanted, f"{source} {wanted}"


def apply_profile(raw: dict[str, Any], profile: str) -> dict[str, Any]:
    """Overrides of [profiles.<profile>] applied to [run] and to every benchmark."""
    data = copy.deepcopy(raw)
    profiles = data.get("profiles")
    overrides = profiles.get(profile, {}) if isinstance(profiles, dict) else {}
    if not isinstance(overrides, dict):
        return data  # the schema reports the wrong type
    run = data.setdefault("run", {})
    for key, value in overrides.items():
        if key in schema.PROFILE_RUN_KEYS and isinstance(run, dict):
            run[key] = value
        elif key in schema.AXES:
            for bench in data.get("benchmarks", []) if isinstance(data.get("benchmarks"), list) else []:
                if isinstance(bench, dict):
                    bench[key] = value
                    # A benchmark-level count the profile sets in [run] would otherwise win.
    for bench in data.get("benchmarks", []) if isinstance(data.get("benchmarks"), list) else []:
        if isinstance(bench, dict):
            for key in overrides:
                if key in ("steps", "warmup_steps", "repeats", "timeout"):
                    bench.pop(key, None)
    return data


def check_image(path: Path, env_name: str, image: str, derived: bool = False) -> None:
    folder = (IMAGES_DIR / image).resolve()
    if not folder.is_relative_to(IMAGES_DIR.resolve()) or folder == IMAGES_DIR.resolve():
        raise UsageError(f"{path}: environments.{env_name}.image: {image!r} escapes images/")
    if not folder.is_dir():
        known = sorted(p.name for p in IMAGES_DIR.iterdir() if p.is_dir()) if IMAGES_DIR.is_dir() else []
        from ..errors import did_you_mean

        raise UsageError(f"{path}: environments.{env_name}.image: no folder images/{image}"
                         f"{' to derive a stack from' if derived else ''}"
                         f"{did_you_mean(image, known)}")


def resolve_python(path: Path, env_name: str, python: str) -> str:
    """An existing interpreter, resolved once and absolute: a path relative to the matrix's
    folder (never to the working folder, which a resume may not share), a bare name found on
    PATH. It must be an executable file (whether it can run the worker is checked when the
    environment is prepared)."""
    where = f"{path}: environments.{env_name}.python"
    if os.sep in python:
        found: str | None = os.path.abspath(path.parent / Path(python).expanduser())
    else:
        found = shutil.which(python)
        found = os.path.abspath(found) if found else None
    if not found or not Path(found).is_file():
        raise UsageError(f"{where}: {python!r}: no such file")
    if not os.access(found, os.X_OK):
        raise UsageError(f"{where}: {python!r} is not executable")
    return found


def load(path: str | Path, profile: str | None = None, gpu_found: bool = False) -> Matrix:
    """Read, apply the profile, validate and expand. Raises UsageError with one line."""
    path = Path(path).absolute()      # resolved once: messages and the manifest name it exactly
    raw = read_toml(path)
    chosen, reason = choose_profile(raw, profile, gpu_found)
    resolved = apply_profile(raw, chosen)
    try:
        spec = schema.validate(resolved, path.parent)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply (arrays or tables inside each other)") \
            from None
    for name, env in spec.environments.items():
        if env.python is not None:
            # Stored absolute (the cells, the run's matrix.toml and its digest): a resume whose
            # interpreter is another one is refused as another matrix.
            env.python = resolve_python(path, name, env.python)
            resolved["environments"][name]["python"] = env.python
        elif env.image is not None and not schema.is_image_reference(env.image):
            check_image(path, name, env.image, env.derived)   # a reference: checked when pulled
    resolved.get("run", {}).update(profile=chosen)
    for name, declared in spec.workloads.items():      # the code it ran: a resume checks it
        resolved["workloads"][name]["sha256"] = declared.read.sha256
    matrix = Matrix(path=path, spec=spec, profile=chosen, profile_reason=reason, resolved=resolved)
    matrix.cells = expand(matrix, path)
    if spec.run.calibrate:
        matrix.calibration = calibration_cells(matrix)
    return matrix


def expand(matrix: Matrix, path: Path) -> list[Cell]:
    spec, run = matrix.spec, matrix.spec.run
    cells: dict[str, Cell] = {}
    origin: dict[str, int] = {}
    varying = schema.AXES       # task and batch_size first: they are the cell's own fields
    for index, bench in enumerate(spec.benchmarks):
        names = list(spec.environments) if "*" in bench.environments else bench.environments
        axis_values = [bench.axis_values(a) for a in varying]
        if bench.profiles is not None and matrix.profile not in bench.profiles:
            # Another profile's benchmark: no cell of this run (counted, said by the plan).
            matrix.left_out[index] = len(names) * math.prod(map(len, axis_values)) * \
                len(bench.option_grid())
            continue
        grid = itertools.product(names, *axis_values, bench.option_grid())
        for env_name, *values, chosen_options in grid:
            env = spec.environments[env_name]
            coords = dict(zip(varying, values, strict=True))
            task, batch_size = coords.pop("task"), coords.pop("batch_size")
            user = spec.workloads[bench.workload].read if bench.workload in spec.workloads \
                else None
            defaults = user.defaults if user is not None \
                else catalog.default_sizes(bench.workload, coords["size"])
            options = {**defaults, **chosen_options}
            cell = Cell(
                environment=env_name, api=env.api, backend=env.backend, image=env.image,
                python=env.python, pins=env.stack_pins, packages=tuple(env.packages),
                workload=bench.workload, task=task, batch_size=batch_size,
                axes=Axes(coords),
                options=options, env=worker_env(run, env),
                steps=bench.steps or run.steps, warmup_steps=bench.warmup_steps or run.warmup_steps,
                repeats=bench.repeats or run.repeats, timeout=bench.timeout or run.timeout,
                not_applicable=catalog.not_applicable_reason(
                    spec.workload(bench.workload), env.api, env.backend, coords, task,
                    batch_size, options),
                settings=protocol.settings_from(run),
                keep_compile_caches=run.keep_compile_caches,
                settle_s=run.settle, settle_temp_c=run.settle_temperature,
                check_answers=bench.check_answers, user_workload=user,
            )
            if cell.id in cells:
                raise UsageError(f"{path}: benchmarks[{index}] repeats cell {cell.name} of "
                                 f"benchmarks[{origin[cell.id]}]")
            cells[cell.id] = cell
            origin[cell.id] = index
    return list(cells.values())


# The frameworks' own switches for on-demand device memory ([run] preallocate = false).
NO_PREALLOCATION_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}


def worker_env(run: schema.RunSettings, env: schema.EnvironmentSpec) -> dict[str, str]:
    """The environment variables of a cell's worker: the environment's own win over the run's."""
    return {**({} if run.preallocate else NO_PREALLOCATION_ENV), **env.env}


# Matrix sides of the calibration matmuls per size profile: on a GPU the largest are long enough
# that launch overhead is negligible (8192³ × 2 = 1.1 TFLOP per step); the fastest counts.
CALIBRATION_SIZES = {"full": (4096, 8192, 16384), "small": (1024, 2048), "tiny": (128, 256)}


def calibration_cells(matrix: Matrix) -> list[Cell]:
    """The measured peak ([run] calibrate): one calibration per environment and precision
    (float32, bfloat16) where a matmul applies, each timing several sizes and keeping the
    fastest. They run before the cells and are never cells of the run."""
    run = matrix.spec.run
    size = matrix.spec.profiles.get(matrix.profile, {}).get("size", "full")
    out = []
    for env_name, env in matrix.spec.environments.items():
        for precision in ("float32", "bfloat16"):
            axes = Axes.defaults(precision=precision, size=size)
            if catalog.not_applicable_reason("matmul", env.api, env.backend, dict(axes), "run"):
                continue
            out.append(Cell(environment=env_name, api=env.api, backend=env.backend,
                            image=env.image, python=env.python, pins=env.stack_pins,
                            packages=tuple(env.packages), workload="matmul", task="run",
                            batch_size=1, axes=axes, options={"n": CALIBRATION_SIZES[size][-1]},
                            env=worker_env(run, env), steps="auto", warmup_steps=run.warmup_steps,
                            repeats=1, timeout=run.timeout,
                            settings=protocol.settings_from(
                                run, calibration_sizes=list(CALIBRATION_SIZES[size])),
                            keep_compile_caches=run.keep_compile_caches,
                            settle_s=run.settle, settle_temp_c=run.settle_temperature))
    return out
