"""Where a valid value does not apply: each rule names the axis it is about (None: the workload
itself) and returns the reason a cell is not applicable, or None. Rules are asked in the order
they are declared here; the first reason is the cell's."""

from __future__ import annotations

from .axes import TORCH_COMPILE_MODES
from .base import AXES, Where, rule


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
    prefix = c.api.replace("-", "_")
    model = " (nor keras_model and keras_data)" if prefix in ("keras", "tf_keras") \
        and c.task in ("fit", "predict") else ""
    return f"{c.workload.origin} defines no {prefix}_{c.task}{model}"


@rule("task")
def workload_task(c: Where) -> str | None:
    return None if c.task in c.workload.tasks else f"{c.workload.name} has no task {c.task!r}"


@rule("precision")
def workload_precision(c: Where) -> str | None:
    if c.axes["precision"] in c.workload.precisions:
        return None
    return f"{c.workload.name} runs {'/'.join(c.workload.precisions)} only"


@rule("jit")
def numpy_jit(c: Where) -> str | None:
    if c.api == "numpy" and c.axes["jit"] not in (False, "auto"):
        return "NumPy has no compiler (jit must be false)"
    return None


@rule("precision")
def numpy_precision(c: Where) -> str | None:
    if c.api == "numpy" and c.axes["precision"] != "float32":
        return "NumPy runs float32 only (no bfloat16, mixed or quantized precision)"
    return None


@rule("device")
def numpy_device(c: Where) -> str | None:
    return "NumPy runs on the CPU only" if c.api == "numpy" and c.axes["device"] == "gpu" else None


@rule("tf32")
def numpy_tf32(c: Where) -> str | None:
    return "NumPy has no TF32 mode" if c.api == "numpy" and c.axes["tf32"] else None


@rule("jit")
def torch_compile_modes(c: Where) -> str | None:
    jit = c.axes["jit"]
    if isinstance(jit, str) and jit in TORCH_COMPILE_MODES and not (
            c.api in ("torch", "hf") or c.keras_on("torch")):
        return f"torch.compile mode {jit!r} applies to torch only"
    return None


@rule("jit")
def keras_ops_jit(c: Where) -> str | None:
    if c.workload.family == "ops" and c.api == "keras" and c.axes["jit"] is True:
        return "keras.ops has no compile switch outside a model (use the native API's jit)"
    return None


@rule("steps_per_execution")
def keras_steps_per_execution(c: Where) -> str | None:
    if c.axes["steps_per_execution"] == 1:
        return None
    if c.api not in ("keras", "tf-keras"):
        return "steps_per_execution is a Keras setting"
    if c.backend == "torch":
        return "Keras on PyTorch requires steps_per_execution = 1"
    if c.workload.family == "ops":
        return "steps_per_execution applies to model.fit/predict only"
    if c.workload.family == "hub":
        return "keras-hub workloads time one batch (or generate call) per call"
    if c.workload.family == "user" and c.workload.runs_as(c.api, c.task) != "model":
        return "a step function runs one step per call (steps_per_execution applies to " \
               "keras_model's fit and predict)"
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
def keras2_bfloat16(c: Where) -> str | None:
    if c.api == "tf-keras" and str(c.axes["precision"]) == "bfloat16":
        return "Keras 2 runs bfloat16 as a mixed policy only"
    return None


# --- data-parallel cells (devices > 1; docs/scaling.md) -------------------------------------

# Keras 3.15 has a distribution backend for JAX and TensorFlow only (keras/src/backend/*/
# distribution_lib.py); its torch guide trains under DDP with a hand-written loop, never fit.
KERAS_TORCH_DATA_PARALLEL = (
    "Keras on PyTorch has no data-parallel model.fit (keras.distribution has no torch backend; "
    "Keras's multi-GPU torch guide wraps the model in DDP under its own loop, not fit)")
# Where a data-parallel step exists, how each API runs it (the worker records what it did in
# effective.data_parallel).
DATA_PARALLEL_APIS = {
    "keras": "keras.distribution.DataParallel (JAX) or tf.distribute.MirroredStrategy (TF)",
    "tf-keras": "tf.distribute.MirroredStrategy", "tensorflow": "tf.distribute.MirroredStrategy",
    "jax": "jax.sharding (NamedSharding: batch sharded, parameters replicated)",
    "torch": "DistributedDataParallel, one process per device", "hf": "DistributedDataParallel",
}


@rule("devices")
def data_parallel(c: Where) -> str | None:
    """devices > 1: a task and an API that shard a step over several devices."""
    devices = c.axes["devices"]
    if devices == 1:
        return None
    if c.api not in DATA_PARALLEL_APIS:
        return f"{c.api} runs on one device: it has no data-parallel path"
    if c.keras_on("torch"):
        return KERAS_TORCH_DATA_PARALLEL
    if c.workload.family == "user":
        if c.workload.runs_as(c.api, c.task) != "model":
            return "a user workload's step function runs on one device (data-parallel cells " \
                   "run keras_model; docs/scaling.md)"
    elif c.task not in c.workload.data_parallel:
        if not c.workload.data_parallel:
            return f"{c.workload.name} has no data-parallel recipe (devices > 1 runs the CNN, " \
                   "BERT and user workloads)"
        return f"{c.workload.name} shards {' and '.join(c.workload.data_parallel)} only"
    if c.task == "predict" and c.api in ("torch", "hf"):
        return "DDP shards training: a forward pass has nothing to all-reduce (run one-device " \
               "cells side by side instead)"
    if c.axes["data"] == "dataset" and c.api in ("torch", "jax", "tensorflow"):
        return "a native loop's data = 'dataset' has no sharded pipeline yet (use 'device' or " \
               "'arrays')"
    return None


@rule("scaling")
def strong_scaling_split(c: Where) -> str | None:
    devices = c.axes["devices"]
    if c.axes["scaling"] != "strong" or c.batch_size is None or c.batch_size % devices == 0:
        return None
    return f"batch_size {c.batch_size} does not split evenly over {devices} devices (strong " \
           "scaling: batch_size is the global batch)"
