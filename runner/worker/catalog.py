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
    # The same work in every API by default: the training set already on the device, so no
    # timed step of a native loop copies its batch from the host ("arrays" does, while Keras
    # fit overlaps that copy in its own pipeline).
    "data": "device",
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


_HUB_OPTIONS = {
    "preset": Option(str, "local folder of a keras-hub (Keras 2: keras-nlp/keras-cv) preset to load "
                          "weights from; never a hub name (nothing is downloaded)"),
}
HUB_WORKLOADS = ("bert", "sam", "stable_diffusion", "gemma", "mistral")

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
            {"behaviour": Option(str, "ok | fail | crash | hang | orphan | flood: what the "
                                      "step does"),
             "sleep_ms": Option(float, "how long an ok (orphan, flood) step sleeps", True),
             "marker": Option(str, "orphan: a word in the command line of the process it "
                                   "leaves behind"),
             "flood_mb": Option(float, "flood: megabytes printed before the first step", True)},
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
        # keras-hub models (the Keras 3 benchmark table). Keras 3 runs keras-hub 0.32; Keras 2
        # ("tf-keras" api, image keras2-tf215) runs the same configurations with keras-nlp /
        # keras-cv 0.8, which have no Gemma or Mistral (see not_applicable_reason).
        Workload(
            "bert", ("fit", "predict"), ("keras", "tf-keras"), True, PRECISIONS,
            {**_HUB_OPTIONS,
             "sequence_length": Option(int, "tokens per sample (default: full 512, tiny 32)", True)},
            help="BERT text classifier, bert_base_en architecture (random weights); expected "
                 "peaks, float32, 512 tokens: fit b32 ~26 GB, predict b256 ~7 GB "
                 "(benchmarks/peak_memory.py)",
        ),
        Workload(
            "sam", ("fit", "predict"), ("keras", "tf-keras"), True, PRECISIONS, dict(_HUB_OPTIONS),
            help="SegmentAnything, sam_huge_sa1b architecture (ViT-H image encoder); fit trains "
                 "the image encoder alone against random embedding targets, as the study did; "
                 "expected peaks, float32, 1024×1024: fit b1 ~50 GB before the GPU compiler's "
                 "rematerialisation (the study ran it on 40 GB), predict b4 ~4 GB "
                 "(benchmarks/peak_memory.py)",
        ),
        Workload(
            "stable_diffusion", ("fit", "predict"), ("keras", "tf-keras"), True, PRECISIONS,
            {**_HUB_OPTIONS,
             "num_steps": Option(int, "predict: denoising steps per generate call (time is per "
                                      "denoising step)", True),
             "guidance_scale": Option(float, "predict: classifier-free guidance scale", True),
             "image_size": Option(int, "image side: full 512 (the study's scale; SD3's native "
                                       "1024 is one option away), small 256, tiny 64; Keras 3 "
                                       "(SD3) needs a multiple of 16, Keras 2 (SD v1.4) of 128",
                                  True)},
            help="StableDiffusion3 medium (Keras 2: keras-cv Stable Diffusion v1.4); fit trains "
                 "the VAE image encoder as the study did; expected peaks at the study's batch "
                 "sizes, float32, 512×512: fit b8 ~34 GB, predict b13 ~19 GB (XLA's buffer "
                 "plan, benchmarks/peak_memory.py): both fit a 40 GB A100",
        ),
        *(
            Workload(
                name, ("fit", "generate"), ("keras",), True, PRECISIONS,
                {**_HUB_OPTIONS,
                 "sequence_length": Option(int, "fit: tokens per sample (default 128)", True),
                 "max_length": Option(int, "generate: total sequence length (default 50)", True),
                 "lora_rank": Option(int, "fit: LoRA rank (default 4; 0 trains every weight)")},
                help=help_text,
            )
            for name, help_text in (
                ("gemma", "Gemma causal LM, gemma_7b_en architecture; fit with LoRA; expected "
                          "peaks, bfloat16: fit b8 ~29 GB, generate b32 ~22 GB "
                          "(benchmarks/peak_memory.py)"),
                ("mistral", "Mistral causal LM, mistral_7b_en architecture; fit with LoRA; "
                            "expected peaks, bfloat16: fit b8 ~24 GB, generate b32 ~16 GB "
                            "(benchmarks/peak_memory.py)"),
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
    if api == "tf-keras" and workload in ("gemma", "mistral"):
        return "Keras 2 (keras-nlp 0.8) has no Gemma or Mistral"
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
        if workload in HUB_WORKLOADS:
            return "keras-hub workloads time one batch (or generate call) per call"
    if axes["data"] != AXIS_DEFAULTS["data"] and not spec.uses_data_axis:
        return f"{workload} generates its inputs on the device; data does not apply"
    if api == "tf-keras" and workload == "stable_diffusion" and axes["size"] != "full":
        return "keras-cv 0.8's Stable Diffusion has one fixed 1 B-parameter architecture (no tiny)"
    if api == "tf-keras" and str(axes["precision"]) == "bfloat16":
        return "Keras 2 runs bfloat16 as a mixed policy only"
    return None


def default_sizes(workload: str, size: str) -> dict[str, Any]:
    """Size presets that options may override."""
    table = {
        "matmul": {"full": {"n": 4096}, "small": {"n": 1024}, "tiny": {"n": 256}},
        "elementwise": {"full": {"n": 2**24}, "small": {"n": 2**20}, "tiny": {"n": 2**14}},
        "cnn": {"full": {"samples": 60_000}, "small": {"samples": 8_192}, "tiny": {"samples": 1_024}},
        # keras-hub models: the study's settings at full size (BERT sequence length 512; Gemma and
        # Mistral fit at sequence length 128 with LoRA rank 4, generate to length 50; SD denoising
        # steps per predict call); tiny keeps the shapes small for CPU smoke runs.
        "bert": {"full": {"sequence_length": 512}, "small": {"sequence_length": 128},
                 "tiny": {"sequence_length": 32}},
        "stable_diffusion": {"full": {"num_steps": 25, "image_size": 512},
                             "small": {"num_steps": 10, "image_size": 256},
                             "tiny": {"num_steps": 2, "image_size": 64}},
        **{lm: {"full": {"sequence_length": 128, "max_length": 50, "lora_rank": 4},
                "small": {"sequence_length": 128, "max_length": 50, "lora_rank": 4},
                "tiny": {"sequence_length": 32, "max_length": 50, "lora_rank": 4}}
           for lm in ("gemma", "mistral")},
    }
    return dict(table.get(workload, {}).get(size, {}))
