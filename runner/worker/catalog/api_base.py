"""The shapes of the API records (apis.py declares them): a capability, an engine, a tuning
knob, an API; their registries and the functions that declare and look them up. Standard library
only, importing nothing of the catalog (base.py's Workload reads the registry)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Capability:
    """What an API or engine can do: `how` it runs (a few words a record and the docs show), or,
    absent, the `reason` a cell that asks for it is not applicable."""

    how: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if bool(self.how) == bool(self.reason):
            raise ValueError("a capability says how it runs or why it is absent (one of them)")

    def __bool__(self) -> bool:
        return bool(self.how)


def has(how: str) -> Capability:
    return Capability(how=how)


def lacks(reason: str) -> Capability:
    return Capability(reason=reason)


@dataclass(frozen=True)
class Engine:
    """The array library an API computes with."""

    name: str
    title: str                          # as tables name it: "PyTorch"
    array_type: str                     # what a user's step returns: "torch.Tensor"
    # The profiler a profiled pass uses (how: the capture's kind, runner/worker/profiling/).
    profiler: Capability
    compiler: Capability                # the jit axis (true | false)
    tf32: Capability                    # the tf32 axis (catalog/apis.py TF32 paths: apis/tf32.py)
    gpu: Capability                     # device = "gpu"
    # A data-parallel cell runs one process per device (DDP) rather than one process; each then
    # takes its share of the CPU's threads.
    process_per_device: bool
    # Its device synchronisation waits on the arrays it is given (JAX's block_until_ready), not
    # on the whole device (torch, TensorFlow): a Keras loop hands it the training state.
    waits_on_arrays: bool = False
    # Its data-parallel cells on a CPU split XLA's host platform into devices (XLA_FLAGS, read
    # at import); TensorFlow makes logical devices in code, torch runs processes.
    xla_host_devices: bool = False
    compile_modes: tuple[str, ...] = ()  # torch.compile modes the jit axis may name
    # What Keras 3's jit_compile="auto" runs on it as a backend: "eager" (torch), "graph"
    # (TensorFlow's tf.function), "compiled" (jax.jit); None: not a Keras backend.
    keras_auto: str | None = None
    # Precisions it runs (None: every precision a workload declares), and why only those.
    precisions: tuple[str, ...] | None = None
    precisions_reason: str = ""


@dataclass(frozen=True)
class Knob:
    """A setting the tuned tier may change (docs/tuned.md), declared on the API that has it.

    Its `values` start with the framework's default. It reaches the worker one of three ways:
    `axis`, the axis it sets in the cell's spec (jit, tf32, steps_per_execution: the cell keeps
    its own axis values as coordinates, the worker runs the knob's); `variable`, a variable the
    worker sets before it imports anything (XLA_FLAGS: a value no process can change once the
    framework is loaded); else the spec's `tuning`, which the API's own code reads. Every probe
    is a fresh process, so a knob read at import time is probed like any other. A knob applies
    to a cell only where each of its filters admits it (an empty filter admits everything) and,
    with `only_with`, where that other knob is off its default (fullgraph needs a compiler). It
    never changes what the tuned tier keeps closed (`never_changes`, the same for every knob)."""

    name: str
    values: tuple[Any, ...]
    help: str
    axis: str | None = None
    variable: str | None = None
    cpu_values: tuple[Any, ...] | None = None   # the values worth probing on a CPU (None: all)
    devices: tuple[str, ...] = ()        # ("gpu",): only where the cell runs on a GPU
    tasks: tuple[str, ...] = ()          # () every task
    precisions: tuple[str, ...] = ()     # () every precision; ("float32",): TF32 knobs
    workloads: tuple[str, ...] = ()      # () every workload
    families: tuple[str, ...] = ()       # () every family
    only_with: str | None = None         # another knob that must be off its default
    never_changes: str = ("the model, its weights' seed, the optimizer, sequence length, image "
                          "size, denoising steps, generate length, the batch size and the "
                          "precision class")

    @property
    def default(self) -> Any:
        return self.values[0]

    def values_on(self, device: str) -> tuple[Any, ...]:
        """The values worth probing on a device ("gpu" or "cpu"), the default first."""
        return self.values if device == "gpu" or self.cpu_values is None else self.cpu_values


@dataclass(frozen=True)
class Api:
    """One framework API as a matrix's environment names it."""

    name: str
    title: str
    # The engine it computes with; None for Keras 3, whose engine is its backend (`backends`).
    engine: str | None
    imports: tuple[str, ...]             # top-level modules its worker code imports
    # Workload → the module under runner.worker.apis that implements it (its `build`).
    workloads: Mapping[str, str]
    quantizer: Capability                # quantized precisions (how: "keras" | "torchao")
    data_parallel: Capability            # devices > 1 (how: the strategy, as records say)
    sharded_dataset: Capability          # data = "dataset" in a data-parallel cell
    steps_per_execution: Capability      # steps_per_execution > 1
    ops_compile: Capability              # jit = true on the array workloads (matmul, …)
    backends: tuple[str, ...] = ()       # Keras 3: the engines it runs on, in the study's order
    # Variables set before anything is imported ("{backend}": the cell's backend).
    variables: Mapping[str, str] = field(default_factory=dict)
    keras: int | None = None             # 3 or 2: a Keras API (keras_model/keras_data workloads)
    # The Keras benchmark table's column group: "keras3" | "keras2" | "native" (None: not shown).
    keras_table: str | None = None
    precision_gaps: Mapping[str, str] = field(default_factory=dict)   # precision → why not
    knobs: tuple[Knob, ...] = ()         # what the tuned tier may change (docs/tuned.md)
    # The framework under test's distributions: what a nightly channel follows by default
    # (docs/nightlies.md; a Keras environment follows Keras, not its backend).
    distributions: tuple[str, ...] = ()
    # A backend's exceptions (Keras 3 on torch: no data parallelism), field → its value there.
    on_backend: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def package(self) -> str:
        """Its package under runner.worker.apis: "tf_keras_api" for "tf-keras"."""
        return self.name.replace("-", "_") + "_api"

    @property
    def function_prefix(self) -> str:
        """What names its functions in a user's workload file: tf_keras_fit."""
        return self.name.replace("-", "_")

    def on(self, backend: str | None) -> Api:
        """This API on a backend (Keras 3): its engine and that backend's exceptions in place."""
        if not self.backends:
            return self
        if backend not in self.backends:
            return self                  # unknown: engine None, capabilities as declared
        changes: dict[str, Any] = dict(self.on_backend.get(backend, {}))
        return dataclasses.replace(self, engine=backend, **changes)

    @property
    def engine_record(self) -> Engine | None:
        return ENGINES.get(self.engine) if self.engine else None

    @property
    def gpu(self) -> bool:
        """Whether its cells can run on a GPU (its engine's; unknown: no)."""
        engine = self.engine_record
        return engine is not None and bool(engine.gpu)

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)


ENGINES: dict[str, Engine] = {}
API_RECORDS: dict[str, Api] = {}


def declare_engine(engine: Engine) -> Engine:
    ENGINES[engine.name] = engine
    return engine


def declare_api(api: Api) -> Api:
    for engine in (api.engine, *api.backends):
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"api {api.name}: engine {engine!r} is not declared")
    API_RECORDS[api.name] = dataclasses.replace(
        api, workloads=MappingProxyType(dict(api.workloads)),
        variables=MappingProxyType(dict(api.variables)))
    return API_RECORDS[api.name]


def api(name: str, backend: str | None = None) -> Api:
    """The record of an API (on a backend, for Keras 3). KeyError for an undeclared name."""
    return API_RECORDS[name].on(backend)


def engine_of(name: str, backend: str | None = None) -> str | None:
    """The engine a cell of this API computes with (None: Keras 3 with no backend known)."""
    return api(name, backend).engine
