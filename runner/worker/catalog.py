"""What exists: APIs, workloads, tasks, axis values, per-workload options, and which combinations
apply. Standard library only; the host validates and plans from it, the worker dispatches from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

APIS = ("keras", "tf-keras", "torch", "jax", "tensorflow", "numpy")
KERAS_BACKENDS = ("tensorflow", "jax", "torch")
TASKS = ("fit", "predict", "generate", "run")
PRECISIONS = ("float32", "bfloat16", "mixed_float16", "mixed_bfloat16")
SIZES = ("full", "small", "tiny")
DATA_MODES = ("arrays", "dataset", "device")
DEVICES = ("auto", "gpu", "cpu")
TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
JIT_WORDS = ("auto",) + TORCH_COMPILE_MODES

# Axis defaults when a benchmark does not set them. tf32 = None keeps the framework's own default
# (recorded as the value in effect); device "auto" takes the GPU when the environment has one.
AXIS_DEFAULTS: dict[str, Any] = {
    "precision": "float32",
    "jit": "auto",
    "size": "full",
    "tf32": None,
    "steps_per_execution": 1,
    "data": "arrays",
    "device": "auto",
}


@dataclass(frozen=True)
class Option:
    type: type
    help: str
    positive: bool = False


@dataclass(frozen=True)
class Workload:
    name: str
    tasks: tuple[str, ...]
    apis: tuple[str, ...]                   # APIs with an implementation module
    needs_batch_size: bool
    precisions: tuple[str, ...]
    options: dict[str, Option] = field(default_factory=dict)
    uses_data_axis: bool = False           # only model-training workloads read `data`
    help: str = ""


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "matmul", ("run",), ("numpy", "torch", "jax", "tensorflow", "keras"), False,
            ("float32", "bfloat16"),
            {"n": Option(int, "matrix side (default by size: full 4096, small 1024, tiny 256)", True),
             "to_host": Option(bool, "copy the product back to host memory inside the timed step")},
            help="n×n matrix product; batch_size independent products per step",
        ),
        Workload(
            "elementwise", ("run",), ("numpy", "torch", "jax", "tensorflow", "keras"), False,
            ("float32", "bfloat16"),
            {"n": Option(int, "elements (default by size: full 2**24, small 2**20, tiny 2**14)", True)},
            help="SELU over a large array: eager op-by-op versus compiled",
        ),
        Workload(
            "selftest", ("run",), ("numpy",), False, ("float32",),
            {"behaviour": Option(str, "ok | fail | crash | hang: what the step does"),
             "sleep_ms": Option(float, "how long an ok step sleeps", True)},
            help="diagnostic: checks the runner itself (statuses, timeouts, resume) in seconds",
        ),
        Workload(
            "cnn", ("fit",), ("keras", "tf-keras", "torch", "jax", "tensorflow"), True,
            PRECISIONS,
            {"samples": Option(int, "training samples per epoch (default by size)", True),
             "grad_scaler": Option(bool, "torch mixed_float16: use torch.amp.GradScaler")},
            uses_data_axis=True,
            help="4 Conv2D + 2 Dense layers (~563 k parameters) on 28×28×1 synthetic data",
        ),
        *(
            # keras-hub models: accepted by the schema, implementations not written yet (no API).
            Workload(name, tasks, (), True, PRECISIONS,
                     {"preset": Option(str, "local folder of a keras-hub preset to load weights from")},
                     help=help_text)
            for name, tasks, help_text in (
                ("bert", ("fit", "predict"), "keras-hub BERT classifier"),
                ("sam", ("fit", "predict"), "keras-hub SegmentAnything"),
                ("stable_diffusion", ("fit", "predict"), "keras-hub StableDiffusion3"),
                ("gemma", ("fit", "generate"), "keras-hub Gemma causal LM"),
                ("mistral", ("fit", "generate"), "keras-hub Mistral causal LM"),
            )
        ),
    )
}

# The environment keys that name an API's module under runner.worker.apis.
API_PACKAGES = {api: api.replace("-", "_") + "_api" for api in APIS}


def not_applicable_reason(workload: str, api: str, backend: str | None,
                          axes: dict[str, Any], task: str) -> str | None:
    """Why a valid cell cannot run in this environment, or None when it applies.

    Only combinations that are meaningful elsewhere land here; values that are wrong everywhere
    are validation errors in the matrix schema."""
    spec = WORKLOADS[workload]
    if api not in spec.apis:
        return f"{workload} has no {api} implementation"
    if task not in spec.tasks:
        return f"{workload} has no task {task!r}"
    if axes["precision"] not in spec.precisions:
        return f"{workload} runs {'/'.join(spec.precisions)} only"
    jit = axes["jit"]
    if api == "numpy":
        if jit not in (False, "auto"):
            return "NumPy has no compiler (jit must be false)"
        if axes["precision"] != "float32":
            return "NumPy has no bfloat16 or mixed precision"
        if axes["device"] == "gpu":
            return "NumPy runs on the CPU only"
        if axes["tf32"]:
            return "NumPy has no TF32 mode"
    if isinstance(jit, str) and jit in TORCH_COMPILE_MODES and not (
            api == "torch" or (api == "keras" and backend == "torch")):
        return f"torch.compile mode {jit!r} applies to torch only"
    if workload in ("matmul", "elementwise") and api == "keras" and jit is True:
        return "keras.ops has no compile switch outside a model (use the native API's jit)"
    if axes["steps_per_execution"] != 1:
        if api not in ("keras", "tf-keras"):
            return "steps_per_execution is a Keras setting"
        if backend == "torch":
            return "Keras on PyTorch requires steps_per_execution = 1"
        if workload in ("matmul", "elementwise"):
            return "steps_per_execution applies to model.fit/predict only"
    if axes["data"] != "arrays" and not spec.uses_data_axis:
        return f"{workload} generates its inputs on the device; data does not apply"
    if api == "tf-keras" and workload in ("gemma", "mistral"):
        return "Keras 2 (keras-nlp 0.8) has no Gemma or Mistral"
    if api == "tf-keras" and str(axes["precision"]) == "bfloat16":
        return "Keras 2 runs bfloat16 as a mixed policy only"
    return None


def default_sizes(workload: str, size: str) -> dict[str, Any]:
    """Size presets that options may override."""
    table = {
        "matmul": {"full": {"n": 4096}, "small": {"n": 1024}, "tiny": {"n": 256}},
        "elementwise": {"full": {"n": 2**24}, "small": {"n": 2**20}, "tiny": {"n": 2**14}},
        "cnn": {"full": {"samples": 60_000}, "small": {"samples": 8_192}, "tiny": {"samples": 1_024}},
    }
    return dict(table.get(workload, {}).get(size, {}))
