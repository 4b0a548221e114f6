"""A user workload's bench, on every API: the user's file, imported from its staged copy
(user_code.py), hands the runner either a Keras model and its data, or one step.

- "model" (keras_model(spec) and keras_data(spec), Keras 3 on each backend and Keras 2):
  fit runs model.fit under the same clock as the built-in CNN (keras_fit_clock.BlockClock:
  block samples, Keras's async batch-end dispatch kept, the data on the device unless the data
  axis says otherwise); predict times whole model.predict calls over the data, divided by its
  batches (what a user's predict costs, outputs back on the host). The model's random weights
  are redrawn from NumPy as the keras-hub models' are, so every backend starts from the same
  numbers and the answer (its prediction on the first batch) compares across them; a file
  that sets KEEP_WEIGHTS = True keeps the weights its keras_model gave.
- "step" (<api>_<task>(spec) returning a callable): the worker's own loop times it in
  calibrated blocks, synchronising the device on what the callable returns.

Which of the two a cell runs is the host's decision (the spec's user_workload["runs_as"]).
Hooks the file may define: items_per_step(spec), flops_per_step(spec), answer(spec, output).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any, cast
from collections.abc import Callable, Mapping

import numpy as np

from .. import catalog, user_code
from ..bench import Bench
from ..protocol import CellSpec, UserWorkloadEntry
from . import FrameworkBase, KerasFramework
from . import answers, keras_fit_clock
from .kerashub.inputs import seeded_weights

PREDICT_TIMING = ("one model.predict call over the whole of keras_data's x (its batches one "
                  "by one through the compiled predict function, outputs gathered on the host "
                  "as predict returns them); divided by its batches")


@dataclass(frozen=True)
class UserSpec:
    """What the user's functions receive as `spec`."""

    workload: str
    task: str
    api: str
    backend: str | None            # Keras 3's backend (api "keras"), else None
    batch_size: int                # a data-parallel cell's: the global batch (docs/scaling.md)
    precision: str
    options: Mapping[str, Any]
    device: str                    # "cpu" or "gpu": where the framework runs this cell
    seed: int
    jit: bool | str
    size: str
    tf32: bool | None
    steps_per_execution: int
    data: str
    devices: int                   # the devices one step runs on (docs/scaling.md)
    repeat: int
    keras: Any                     # the Keras in use (Keras APIs): keras, or tf_keras for Keras 2
    jit_compile: Any               # Keras APIs: what to pass to model.compile(jit_compile=...)
    compile: Callable[[Any], Any]  # the jit axis applied to a function (jax.jit, torch.compile…)


def user_spec(spec: CellSpec, fw: FrameworkBase) -> UserSpec:
    keras = getattr(fw, "keras", None)
    return UserSpec(
        workload=spec.workload, task=spec.task, api=spec.api, backend=spec.backend,
        batch_size=spec.batch_size, precision=spec.precision,
        options=MappingProxyType(dict(spec.options)), device=fw.device, seed=spec.seed,
        jit=spec.jit, size=spec.size, tf32=spec.tf32,
        steps_per_execution=spec.steps_per_execution, data=spec.data, devices=spec.devices,
        repeat=spec.repeat,
        keras=keras, jit_compile=fw.jit_compile() if hasattr(fw, "jit_compile") else None,
        compile=fw.compile)


def entry_of(spec: CellSpec) -> UserWorkloadEntry:
    """The spec's user workload (the worker imports this module only for a spec with one)."""
    if spec.user_workload is None:
        raise RuntimeError(f"{spec.workload}: the spec names no user workload")
    return spec.user_workload


def build(spec: CellSpec, fw: FrameworkBase) -> Bench:
    entry = entry_of(spec)
    module = user_code.load(entry)
    uspec = user_spec(spec, fw)
    if entry.get("runs_as") == "model":
        # "model" only on a Keras API (the host's api_tasks): its Framework has the Keras.
        bench = model_bench(spec, cast(KerasFramework, fw), module, uspec)
    else:
        bench = step_bench(spec, fw, module, uspec)
    hooks(bench, module, uspec)
    bench.effective["user_workload"] = f"{entry['file']} " \
        f"({entry['sha256'][:12]}), {entry.get('runs_as')}"
    return bench


def hooks(bench: Bench, module: ModuleType, uspec: UserSpec) -> None:
    """items_per_step(spec) and flops_per_step(spec), where the file defines them."""
    for name in ("items_per_step", "flops_per_step"):
        hook = getattr(module, name, None)
        if hook is None:
            continue
        value = hook(uspec)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise TypeError(f"{name}(spec) returned {value!r}: a positive number")
        setattr(bench, name, float(value))


# --- step functions ---------------------------------------------------------------------------

def step_bench(spec: CellSpec, fw: FrameworkBase, module: ModuleType, uspec: UserSpec) -> Bench:
    name = f"{spec.api.replace('-', '_')}_{spec.task}"
    step = getattr(module, name)(uspec)
    if not callable(step):
        raise TypeError(f"{name}(spec) returned {type(step).__name__}: it returns a callable "
                        "that performs one step")
    answer_hook: Any = getattr(module, "answer", None)     # the user's: called only if given

    def answer() -> dict[str, Any]:
        out = step()
        fw.sync(out)
        return checked_answer(answer_hook(uspec, host_values(out)))

    note = {} if answer_hook is not None else {
        "answer_note": f"{entry_of(spec)['file']} defines no answer(spec, output) hook"}
    effective = {"jit": fw.effective.get("jit", "the step function's own")}
    return Bench(step=step, sync=checked_sync(fw, spec, name, effective),
                 items_per_step=spec.batch_size, loss=scalar if spec.task == "fit" else None,
                 timing=f"one call of the step {name}(spec) returned", effective=effective,
                 extra=note, answer=answer if answer_hook is not None else None)


def checked_sync(fw: FrameworkBase, spec: CellSpec, name: str,
                 effective: dict[str, Any] | None = None) -> Callable[[Any], None]:
    """fw.sync, after checking once (the first call's output) that the step returns something
    the device can be waited on: else every timing would stop the clock before the work. An
    output copied to the host (`loss.cpu()`) passes that check but waits for the device in
    every call: `effective["step_output"]` says so (host_copy_note)."""
    checked = False

    def sync(out: Any) -> None:
        nonlocal checked
        if not checked:
            arrays = [leaf for leaf in parts(out) if fw.is_array(leaf)]
            if not arrays:
                raise TypeError(f"the step {name}(spec) returned {type(out).__name__}: return "
                                f"what it computed (a {array_kind(spec)}), which the runner "
                                "waits for before it reads the clock")
            note = host_copy_note(fw.device, [fw.on_host(leaf) for leaf in arrays])
            if note is not None and effective is not None:
                effective["step_output"] = note
            checked = True
        fw.sync(out)

    return sync


def host_copy_note(device: str, on_host: list[bool]) -> str | None:
    """What a record says of a step on a GPU whose every returned array is in host memory: the
    copy waits for the device in every call, so its blocks time a synchronisation per call (the
    runner's one per block adds nothing), as a plain loop of that step would."""
    if device != "gpu" or not on_host or not all(on_host):
        return None
    return ("a host copy (every array the step returns is in host memory): each call waits for "
            "the device to copy it, so each block holds one synchronisation per call")


def parts(out: Any) -> list[Any]:
    """The leaves of a nested output (dicts, lists, tuples), as they are."""
    if isinstance(out, dict):
        return [leaf for value in out.values() for leaf in parts(value)]
    if isinstance(out, (list, tuple)):
        return [leaf for value in out for leaf in parts(value)]
    return [out]


def array_kind(spec: CellSpec) -> str:
    """What a step of this API returns, in words (its engine's array type)."""
    engine = catalog.api(spec.api, spec.backend).engine_record
    return engine.array_type if engine is not None else "tensor"


def host_values(out: Any) -> Any:
    """A step's output with every array as float NumPy (for the answer hook)."""
    if isinstance(out, dict):
        return {key: host_values(value) for key, value in out.items()}
    if isinstance(out, (list, tuple)):
        return type(out)(host_values(value) for value in out)
    if hasattr(out, "detach"):                         # torch
        return out.detach().float().cpu().numpy()
    if hasattr(out, "numpy") and not isinstance(out, np.ndarray):   # TensorFlow
        return np.asarray(out.numpy(), np.float32)
    return np.asarray(out, np.float32)


def scalar(out: Any) -> float:
    """A fit step's loss, when its output is one number (else unknown)."""
    values = np.asarray(host_values(out)).reshape(-1) if not isinstance(out, (dict, list, tuple)) \
        else np.zeros(0)
    return float(values[0]) if values.size == 1 else math.nan


def checked_answer(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not all(isinstance(k, str) for k in answer):
        raise TypeError(f"answer(spec, output) returned {type(answer).__name__}: a dict of "
                        "named numbers (or lists of numbers)")
    return answer


# --- Keras models -----------------------------------------------------------------------------

def model_bench(spec: CellSpec, fw: KerasFramework, module: ModuleType, uspec: UserSpec) -> Bench:
    keras = fw.keras
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        model = module.keras_model(uspec)
    if not isinstance(model, keras.Model):
        raise TypeError(f"keras_model(spec) returned {type(model).__module__}."
                        f"{type(model).__name__}, not a {keras.__name__}.Model (build it with "
                        "spec.keras, the Keras this environment runs)")
    x, y = checked_data(module.keras_data(uspec), spec)
    check_compiled(model, spec)
    probe = first_rows(x, spec.batch_size)
    model.predict(probe, verbose=0)                  # builds a model not built yet
    # The model's random weights are redrawn from the seed (every backend then starts from the
    # same numbers), unless the file says its weights are its own (KEEP_WEIGHTS = True: loaded,
    # or set from NumPy as its native steps' are): those are never touched.
    keep = getattr(module, "KEEP_WEIGHTS", False) is True
    facts: dict[str, Any] = {"seeded_weights": {"redrawn": 0, "kept": len(model.weights)}
                             if keep else seeded_weights(model, spec.seed),
                             "weights": "the file's own (KEEP_WEIGHTS = True)" if keep
                             else "redrawn from the seed"}
    initial = model.predict(probe, verbose=0)          # NumPy, as predict returns it
    answer_hook = getattr(module, "answer", None)
    answer = (lambda: checked_answer(answer_hook(uspec, initial))) if answer_hook \
        else (lambda: answers.output(initial))
    effective = {"jit_compile": getattr(model, "jit_compile", None),
                 "steps_per_execution": steps_per_execution(model)}
    if spec.task == "fit":
        bench = fit_bench(spec, fw, model, x, y)
    else:
        bench = predict_bench(spec, fw, model, x)
    bench.effective.update(effective)
    bench.extra.update(facts, parameters=int(model.count_params()), samples=rows(x))
    bench.answer = answer
    return bench


def checked_data(data: Any, spec: CellSpec) -> tuple[Any, Any]:
    """keras_data's (x, y), trimmed to whole calls (batch_size × steps_per_execution), so that
    a compiled function never sees a second shape."""
    if not isinstance(data, tuple) or len(data) != 2:
        raise TypeError(f"keras_data(spec) returned {type(data).__name__}: it returns (x, y), "
                        "NumPy arrays (y may be None for predict)")
    x, y = data
    for part, value in (("x", x), ("y", y)):
        if value is None and (part == "x" or spec.task == "fit"):
            raise TypeError(f"keras_data(spec): {part} is None (fit needs x and y)")
        if value is not None and not all(isinstance(a, np.ndarray) for a in parts(value)):
            raise TypeError(f"keras_data(spec): {part} holds a non-NumPy value; give NumPy "
                            "arrays (a dict or list of them for several inputs)")
    whole = spec.batch_size * max(1, spec.steps_per_execution)
    kept = rows(x) // whole * whole
    if kept == 0:
        raise ValueError(f"keras_data(spec) returned {rows(x)} samples, fewer than one call "
                         f"(batch_size × steps_per_execution = {whole})")
    return first_rows(x, kept), first_rows(y, kept)


def rows(x: Any) -> int:
    return int(parts(x)[0].shape[0])


def first_rows(x: Any, count: int) -> Any:
    if x is None:
        return None
    if isinstance(x, dict):
        return {key: value[:count] for key, value in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(value[:count] for value in x)
    return x[:count]


def steps_per_execution(model: Any) -> int:
    value = getattr(model, "steps_per_execution", 1)
    return int(value.numpy()) if hasattr(value, "numpy") else int(value or 1)


def check_compiled(model: Any, spec: CellSpec) -> None:
    """fit needs a compiled model; the jit and steps_per_execution axes must be what it was
    compiled with (the user passes spec.jit_compile and spec.steps_per_execution)."""
    if getattr(model, "optimizer", None) is None:
        if spec.task == "fit" or isinstance(spec.jit, bool) or spec.steps_per_execution != 1:
            needs = "fit" if spec.task == "fit" else "the matrix's jit and steps_per_execution"
            raise TypeError(f"keras_model(spec) returned a model that is not compiled: {needs} "
                            "needs model.compile(optimizer=..., loss=..., jit_compile="
                            "spec.jit_compile, steps_per_execution=spec.steps_per_execution)")
        return
    if isinstance(spec.jit, bool) and bool(getattr(model, "jit_compile", False)) != spec.jit:
        raise ValueError(f"the matrix asks jit = {str(spec.jit).lower()}, the model was "
                         f"compiled with jit_compile={getattr(model, 'jit_compile', None)}: pass "
                         "jit_compile=spec.jit_compile to model.compile")
    if steps_per_execution(model) != spec.steps_per_execution:
        raise ValueError(f"the matrix asks steps_per_execution = {spec.steps_per_execution}, "
                         f"the model was compiled with {steps_per_execution(model)}: pass "
                         "steps_per_execution=spec.steps_per_execution to model.compile")


def on_device(keras: Any, x: Any) -> Any:
    """Arrays as the backend's tensors, made once (the built-in CNN's data = "device")."""
    if hasattr(keras, "ops"):                          # Keras 3
        convert = keras.ops.convert_to_tensor
    else:                                              # Keras 2
        convert = sys.modules["tensorflow"].convert_to_tensor
    if isinstance(x, dict):
        return {key: convert(value) for key, value in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(convert(value) for value in x)
    return convert(x)


def fit_args(spec: CellSpec, fw: KerasFramework, x: Any, y: Any) -> tuple[dict[str, Any], str]:
    """fit()'s data arguments for the data axis, and what they are (the CNN's feeds)."""
    if spec.data == "device":
        return ({"x": on_device(fw.keras, x), "y": on_device(fw.keras, y),
                 "batch_size": spec.batch_size, "shuffle": True},
                "tensors made before fit() (on the default device)")
    if spec.data == "arrays":
        return {"x": x, "y": y, "batch_size": spec.batch_size, "shuffle": True}, \
            "NumPy arrays to fit()"
    if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
        raise TypeError("data = 'dataset' needs keras_data's x and y as one array each")
    from .keras_api.feeds import training_data

    backend = spec.backend or "tensorflow"
    return training_data(fw.keras, backend, _Batches(x, y, spec.batch_size), "dataset", spec.seed)


@dataclass(frozen=True)
class _Batches:
    """keras_data's arrays in the shape the CNN's dataset feeds read."""

    x_train: np.ndarray
    y_train: np.ndarray
    batch_size: int

    @property
    def steps_per_epoch(self) -> int:
        return len(self.y_train) // self.batch_size


def fit_bench(spec: CellSpec, fw: KerasFramework, model: Any, x: Any, y: Any) -> Bench:
    per_call = spec.steps_per_execution
    args, feed = fit_args(spec, fw, x, y)
    steps_per_epoch = rows(x) // spec.batch_size
    extra: dict[str, Any] = {"steps_per_epoch": steps_per_epoch}
    drive = keras_fit_clock.fit_drive(fw.keras, model, args, per_call=per_call,
                                      steps_per_epoch=steps_per_epoch, extra=extra)
    backend = spec.backend or "tensorflow"
    return Bench(drive=drive, items_per_step=spec.batch_size, steps_per_call=per_call,
                 calls_per_epoch=steps_per_epoch // per_call, loss=float,
                 sync=keras_fit_clock.state_sync(fw, model, backend),
                 timing=keras_fit_clock.TIMING,
                 effective={"data": feed, **keras_fit_clock.dispatch_facts(fw.keras)},
                 extra=extra)


def predict_bench(spec: CellSpec, fw: KerasFramework, model: Any, x: Any) -> Bench:
    data = on_device(fw.keras, x)
    batches = rows(x) // spec.batch_size

    def step() -> Any:
        return model.predict(data, batch_size=spec.batch_size, verbose=0)

    return Bench(step=step, items_per_step=spec.batch_size, steps_per_call=batches,
                 returns_to_host=True, timing=PREDICT_TIMING,
                 effective={"data": "tensors made before predict() (on the default device)"},
                 extra={"batches_per_call": batches})
