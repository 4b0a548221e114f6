"""Where a valid value does not apply: each rule names the axis it is about (None: the workload
itself) and returns the reason a cell is not applicable, or None. Rules are asked in the order
they are declared here; the first reason is the cell's."""

from __future__ import annotations

from .axes import TORCH_COMPILE_MODES
from .base import AXES, Where, rule
from .layers import not_applicable as layer_not_applicable


@rule()
def implemented(c: Where) -> str | None:
    if c.api in c.workload.not_applicable:
        return c.workload.not_applicable[c.api]
    if c.api not in c.workload.apis and c.workload.family != "user":    # user_function says
        return f"{c.workload.name} has no {c.api} implementation"
    return None


@rule("task")
def user_function(c: Where) -> str | None:
    """A user workload runs a task on an API only where its file defines the function."""
    if c.workload.family != "user" or c.workload.runs_as(c.api, c.task):
        return None
    record = c.record
    model = " (nor keras_model and keras_data)" if record.keras \
        and c.task in ("fit", "predict") else ""
    return f"{c.workload.origin} defines no {record.function_prefix}_{c.task}{model}"


@rule("task")
def workload_task(c: Where) -> str | None:
    return None if c.task in c.workload.tasks else f"{c.workload.name} has no task {c.task!r}"


@rule("task")
def layer_phase(c: Where) -> str | None:
    """A layer an API lacks, a train step of a layer without weights (catalog/layers.py says
    why each)."""
    if c.workload.family != "layer" or "layer" not in c.options:
        return None
    return layer_not_applicable(str(c.options["layer"]), c.api, c.task)


@rule("precision")
def workload_precision(c: Where) -> str | None:
    if c.axes["precision"] in c.workload.precisions:
        return None
    return f"{c.workload.name} runs {'/'.join(c.workload.precisions)} only"


# --- what the API's engine has (catalog/apis.py) ----------------------------------------------

@rule("jit")
def engine_compiler(c: Where) -> str | None:
    engine = c.record.engine_record
    if engine is None or engine.compiler or c.axes["jit"] in (False, "auto"):
        return None
    return engine.compiler.reason


@rule("precision")
def engine_precisions(c: Where) -> str | None:
    engine = c.record.engine_record
    if engine is None or engine.precisions is None or c.axes["precision"] in engine.precisions:
        return None
    return engine.precisions_reason


@rule("device")
def engine_gpu(c: Where) -> str | None:
    engine = c.record.engine_record
    return engine.gpu.reason if engine is not None and not engine.gpu \
        and c.axes["device"] == "gpu" else None


@rule("tf32")
def engine_tf32(c: Where) -> str | None:
    engine = c.record.engine_record
    return engine.tf32.reason if engine is not None and not engine.tf32 and c.axes["tf32"] \
        else None


@rule("jit")
def torch_compile_modes(c: Where) -> str | None:
    jit = c.axes["jit"]
    engine = c.record.engine_record
    if isinstance(jit, str) and jit in TORCH_COMPILE_MODES and (
            engine is None or jit not in engine.compile_modes):
        return f"torch.compile mode {jit!r} applies to torch only"
    return None


# --- what the API has ---------------------------------------------------------------------------

@rule("jit")
def ops_compile(c: Where) -> str | None:
    if c.workload.family == "ops" and c.axes["jit"] is True and not c.record.ops_compile:
        return c.record.ops_compile.reason
    return None


@rule("steps_per_execution")
def steps_per_execution(c: Where) -> str | None:
    if c.axes["steps_per_execution"] == 1:
        return None
    if not c.record.steps_per_execution:
        return c.record.steps_per_execution.reason
    if c.workload.family == "ops":
        return "steps_per_execution applies to model.fit/predict only"
    if c.workload.family == "hub":
        return "keras-hub workloads time one batch (or generate call) per call"
    if c.workload.family == "layer":
        return "the layer workload times one batch per call"
    if c.workload.family == "user" and c.workload.runs_as(c.api, c.task) != "model":
        return "a step function runs one step per call (steps_per_execution applies to " \
               "keras_model's fit and predict)"
    # A shipped training loop with a data set of its own (the CNN's options.samples): a user's
    # option of that name may mean something else
    samples = c.options.get("samples") if c.workload.family == "model" else None
    if isinstance(samples, int) and c.batch_size is not None \
            and c.batch_size * c.axes["steps_per_execution"] > samples:
        return (f"one call of batch_size × steps_per_execution = "
                f"{c.batch_size * c.axes['steps_per_execution']} samples is more than "
                f"options.samples = {samples}")
    return None


@rule("data")
def training_data(c: Where) -> str | None:
    if c.axes["data"] == AXES["data"].default:
        return None
    if c.workload.family == "user":
        if c.task == "fit" and c.workload.runs_as(c.api, c.task) == "model":
            return None
        return "data applies to keras_model's fit only (a step function feeds itself)"
    if not c.workload.uses_data_axis:
        return f"{c.workload.name} generates its inputs on the device; data does not apply"
    if c.task != "fit":
        return "data applies to a training loop (fit) only: predict feeds one batch made once"
    return None


@rule("size")
def keras2_stable_diffusion_size(c: Where) -> str | None:
    if c.api == "tf-keras" and c.workload.name == "stable_diffusion" and c.axes["size"] != "full":
        return "keras-cv 0.8's Stable Diffusion has one fixed 1 B-parameter architecture (no tiny)"
    return None


@rule("precision")
def api_precision_gaps(c: Where) -> str | None:
    return c.record.precision_gaps.get(str(c.axes["precision"]))


# --- data-parallel cells (devices > 1; docs/scaling.md) -------------------------------------

@rule("devices")
def data_parallel(c: Where) -> str | None:
    """devices > 1: a task and an API that shard a step over several devices."""
    devices = c.axes["devices"]
    if devices == 1:
        return None
    record = c.record
    if not record.data_parallel:
        return record.data_parallel.reason
    if c.workload.family == "user":
        if c.workload.runs_as(c.api, c.task) != "model":
            return "a user workload's step function runs on one device (data-parallel cells " \
                   "run keras_model; docs/scaling.md)"
    elif c.task not in c.workload.data_parallel:
        if not c.workload.data_parallel:
            return f"{c.workload.name} has no data-parallel recipe (devices > 1 runs the CNN, " \
                   "BERT and user workloads)"
        return f"{c.workload.name} shards {' and '.join(c.workload.data_parallel)} only"
    engine = record.engine_record
    if c.task == "predict" and engine is not None and engine.process_per_device:
        return "DDP shards training: a forward pass has nothing to all-reduce (run one-device " \
               "cells side by side instead)"
    if c.axes["data"] == "dataset" and not record.sharded_dataset:
        return record.sharded_dataset.reason
    return None


@rule("scaling")
def strong_scaling_split(c: Where) -> str | None:
    devices = c.axes["devices"]
    if c.axes["scaling"] != "strong" or c.batch_size is None or c.batch_size % devices == 0:
        return None
    return f"batch_size {c.batch_size} does not split evenly over {devices} devices (strong " \
           "scaling: batch_size is the global batch)"
