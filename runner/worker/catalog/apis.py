"""Every framework API, declared once, and the engines they compute with. Standard library only.

An **engine** is the array library a cell computes with (torch, JAX, TensorFlow, NumPy): what a
user's step returns, which profiler it ships, whether it has a compiler, TF32 paths, a GPU, and
its own data-parallel way. An **API** is what a matrix's environment names (`api = "keras"`): its
engine (Keras 3: its backend's), the modules it imports, the variables set before they are, the
worker modules that implement each workload, and its capabilities (quantizer, data parallelism,
steps_per_execution, the array workloads' compile switch) — and, for the tuned tier, its knobs.

Every capability is a `Capability`: how it runs, or why it is absent. None has a default, so a
new API or engine says what it lacks and why; every feature asks the record (rules.py,
quantized_rules.py, the worker's dispatch, profiling, data parallelism, the host's analyses),
and an absent capability makes a cell "not_applicable" with that reason, never applicable by
default. Nothing outside this catalog and an API's own package compares API names
(tests/test_layout.py).

Adding an API: its package `runner/worker/apis/<name>_api/` (a Framework and its workload
modules), its image folder, and one `declare_api(Api(...))` below (CONTRIBUTING.md).
"""

from __future__ import annotations

from .api_base import Api, Engine, Knob, declare_api, declare_engine, has, lacks
from .axes import TORCH_COMPILE_MODES


# --- the engines ------------------------------------------------------------------------------

CPU_ONLY = "NumPy runs on the CPU only"

declare_engine(Engine(
    "torch", "PyTorch", "torch.Tensor", has("torch.profiler"), has("torch.compile"),
    has("torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32"),
    has("CUDA"), process_per_device=True, compile_modes=TORCH_COMPILE_MODES, keras_auto="eager"))
declare_engine(Engine(
    "jax", "JAX", "jax.Array", has("jax.profiler"), has("jax.jit"),
    has("jax_default_matmul_precision"), has("CUDA"), process_per_device=False,
    waits_on_arrays=True, xla_host_devices=True, keras_auto="compiled"))
declare_engine(Engine(
    "tensorflow", "TensorFlow", "tf.Tensor", has("tf.profiler"), has("tf.function(jit_compile)"),
    has("tf.config.experimental.enable_tensor_float_32_execution"), has("CUDA"),
    process_per_device=False, keras_auto="graph"))
declare_engine(Engine(
    "numpy", "NumPy", "NumPy array", has("cProfile"),
    lacks("NumPy has no compiler (jit must be false)"), lacks("NumPy has no TF32 mode"),
    lacks(CPU_ONLY), process_per_device=False, precisions=("float32",),
    precisions_reason="NumPy runs float32 only (no bfloat16, mixed or quantized precision)"))


# --- the APIs ---------------------------------------------------------------------------------

ARRAY_RECIPES = {"matmul": "matmul_common", "elementwise": "elementwise_common"}
# Keras 3.15 has a distribution backend for JAX and TensorFlow only (keras/src/backend/*/
# distribution_lib.py); its torch guide trains under DDP with a hand-written loop, never fit.
KERAS_TORCH_DATA_PARALLEL = (
    "Keras on PyTorch has no data-parallel model.fit (keras.distribution has no torch backend; "
    "Keras's multi-GPU torch guide wraps the model in DDP under its own loop, not fit)")
MIRRORED = "tf.distribute.MirroredStrategy"
DDP = "DistributedDataParallel, one process per device"
NO_NATIVE_SHARDED_DATASET = ("a native loop's data = 'dataset' has no sharded pipeline yet "
                             "(use 'device' or 'arrays')")
NOT_KERAS = "steps_per_execution is a Keras setting"
NUMPY_ONE_DEVICE = "numpy runs on one device: it has no data-parallel path"
TORCHAO = "torchao"
KERAS_QUANTIZE = "keras"

# --- the tuned tier's knobs (docs/tuned.md: each API's, what they may not change) ------------

COMPILE = Knob("compile", ("auto", "default", "reduce-overhead", "max-autotune",
                           "max-autotune-no-cudagraphs"),
               "torch.compile and its mode (auto: eager, torch's default)", axis="jit",
               cpu_values=("auto", "default", "max-autotune-no-cudagraphs"))
FULLGRAPH = Knob("fullgraph", (False, True), "torch.compile(fullgraph=True): one graph, an "
                 "error where it would break", only_with="compile")
TORCH_TF32 = Knob("tf32", (None, True), "TF32 for float32 matmuls and convolutions "
                  "(torch.backends.cuda.matmul.allow_tf32; torch's default is off)", axis="tf32",
                  devices=("gpu",), precisions=("float32",))
CHANNELS_LAST = Knob("channels_last", (False, True), "the convolutions' weights and inputs in "
                     "channels-last memory format", workloads=("cnn",))
# The native CNN trains with RMSprop (the same optimizer on every API), which torch fuses
# nowhere (2.13: Adam, AdamW, SGD, Adagrad): the knob is the Hugging Face fits' (Adam, AdamW).
FUSED_OPTIMIZER = Knob("fused_optimizer", (False, True), "torch.optim.Adam / AdamW(fused=True): "
                       "the update as one fused kernel (torch's default: the multi-tensor "
                       "foreach path on a GPU)", tasks=("fit",))
STATIC_CACHE = Knob("static_cache", (False, True), "generate with a static KV cache "
                    "(cache_implementation='static'), which torch.compile can capture",
                    tasks=("generate",))
ATTENTION = Knob("attention", ("sdpa", "eager"), "attn_implementation: PyTorch's "
                 "scaled_dot_product_attention (transformers' default) or the model's own",
                 families=("hub",), workloads=("bert", "gemma", "mistral"))
KERAS_JIT = Knob("jit_compile", ("auto", True, False), "model.compile(jit_compile=…): XLA on "
                 "JAX and TensorFlow, torch.compile on PyTorch", axis="jit",
                 families=("model", "hub", "user"))
STEPS_PER_EXECUTION = Knob("steps_per_execution", (1, 8, 32, 128), "model.compile("
                           "steps_per_execution=…): steps per compiled call",
                           axis="steps_per_execution", tasks=("fit", "predict"))
TF_JIT = Knob("jit_compile", ("auto", True), "tf.function(jit_compile=True): XLA", axis="jit")
TF_TF32 = Knob("tf32", (None, False), "TF32 for float32 matmuls and convolutions (TensorFlow's "
               "default is on)", axis="tf32", devices=("gpu",), precisions=("float32",))
DONATE = Knob("donate", (False, True), "jax.jit(donate_argnums=…): the training state's "
              "buffers reused in place", workloads=("cnn",), tasks=("fit",))
# Documented in JAX's GPU performance tips; read at import, so set before it (variable).
XLA_FLAGS = Knob("xla_flags", ("", "--xla_gpu_enable_latency_hiding_scheduler=true",
                               "--xla_gpu_enable_triton_gemm=false"),
                 "flags added to XLA_FLAGS (JAX's GPU performance tips)", variable="XLA_FLAGS",
                 devices=("gpu",))
# The runner's own diagnostic workload: knobs of a known cost model, which test the search.
SELFTEST_KNOBS = (
    Knob("selftest_speed", (1.0, 0.5), "selftest: each step sleeps this share of sleep_ms",
         workloads=("selftest",)),
    Knob("selftest_greedy", (False, True), "selftest: a quarter of the step, out of memory "
         "above batch 2", workloads=("selftest",)),
    Knob("selftest_shortcut", (False, True), "selftest: a tenth of the step and a scaled "
         "answer (a different answer, never a winner)", workloads=("selftest",)),
)

declare_api(Api(
    "keras", "Keras 3", None, ("keras", "keras_hub"),
    {**ARRAY_RECIPES, "cnn": "keras_api.cnn", "bert": "keras_api.bert", "sam": "keras_api.sam",
     "stable_diffusion": "keras_api.stable_diffusion", "gemma": "keras_api.gemma",
     "mistral": "keras_api.mistral", "layer": "keras_api.layer"},
    quantizer=has(KERAS_QUANTIZE),
    data_parallel=has("keras.distribution.DataParallel (JAX) or " + MIRRORED + " (TF)"),
    sharded_dataset=has("tf.data through the distribution"),
    steps_per_execution=has("model.compile(steps_per_execution=…)"),
    ops_compile=lacks("keras.ops has no compile switch outside a model (use the native API's "
                      "jit)"),
    backends=("tensorflow", "jax", "torch"), variables={"KERAS_BACKEND": "{backend}"}, keras=3,
    keras_table="keras3", knobs=(KERAS_JIT, STEPS_PER_EXECUTION), distributions=("keras",),
    on_backend={
        "jax": {"data_parallel": has("keras.distribution.DataParallel"),
                "knobs": (KERAS_JIT, STEPS_PER_EXECUTION, XLA_FLAGS)},
        "tensorflow": {"data_parallel": has(MIRRORED)},
        "torch": {"data_parallel": lacks(KERAS_TORCH_DATA_PARALLEL),
                  "steps_per_execution": lacks("Keras on PyTorch requires steps_per_execution "
                                               "= 1"),
                  "knobs": (KERAS_JIT, TORCH_TF32)}},
))
declare_api(Api(
    "tf-keras", "Keras 2 (tf-keras)", "tensorflow",
    ("tf_keras", "keras_nlp", "keras_cv", "tensorflow"),
    {"cnn": "tf_keras_api.cnn", "bert": "tf_keras_api.bert", "sam": "tf_keras_api.sam",
     "stable_diffusion": "tf_keras_api.stable_diffusion", "layer": "tf_keras_api.layer"},
    quantizer=lacks("Keras 2 (tf-keras) has no model.quantize (Keras 3 added it); its "
                    "post-training quantization is TensorFlow Lite's converter, another runtime"),
    data_parallel=has(MIRRORED), sharded_dataset=has("tf.data through the strategy"),
    steps_per_execution=has("model.compile(steps_per_execution=…)"),
    ops_compile=has("tf.function(jit_compile)"),
    variables={"TF_USE_LEGACY_KERAS": "1"}, keras=2, keras_table="keras2",
    knobs=(TF_JIT, STEPS_PER_EXECUTION), distributions=("tf-keras",),
    precision_gaps={"bfloat16": "Keras 2 runs bfloat16 as a mixed policy only"},
))
declare_api(Api(
    "torch", "PyTorch", "torch", ("torch",),
    {**ARRAY_RECIPES, "cnn": "torch_api.cnn", "layer": "torch_api.layer"},
    quantizer=has(TORCHAO), data_parallel=has(DDP), sharded_dataset=lacks(NO_NATIVE_SHARDED_DATASET),
    steps_per_execution=lacks(NOT_KERAS), ops_compile=has("torch.compile"),
    knobs=(COMPILE, FULLGRAPH, TORCH_TF32, CHANNELS_LAST),
    distributions=("torch",),
))
declare_api(Api(
    "jax", "JAX", "jax", ("jax", "jaxlib", "flax", "optax"),
    {**ARRAY_RECIPES, "cnn": "jax_api.cnn", "layer": "jax_api.layer"},
    quantizer=lacks("native JAX has no quantized layers of its own: Google's libraries for it "
                    "(AQT, Qwix) rewrite Flax models for quantized training or serving and are "
                    "not part of this stack; Keras 3 on JAX runs the quantized tier (api = "
                    "\"keras\", backend = \"jax\")"),
    data_parallel=has("jax.sharding (NamedSharding: batch sharded, parameters replicated)"),
    sharded_dataset=lacks(NO_NATIVE_SHARDED_DATASET), steps_per_execution=lacks(NOT_KERAS),
    ops_compile=has("jax.jit"), knobs=(DONATE, XLA_FLAGS), distributions=("jax", "jaxlib"),
))
declare_api(Api(
    "tensorflow", "TensorFlow", "tensorflow", ("tensorflow",),
    {**ARRAY_RECIPES, "cnn": "tensorflow_api.cnn", "layer": "tensorflow_api.layer"},
    quantizer=lacks("native TensorFlow quantizes only by converting to TensorFlow Lite (another "
                    "runtime) or through the Model Optimization Toolkit (Keras 2 models, in "
                    "maintenance); Keras 3 on TensorFlow runs the quantized tier"),
    data_parallel=has(MIRRORED), sharded_dataset=lacks(NO_NATIVE_SHARDED_DATASET),
    steps_per_execution=lacks(NOT_KERAS), ops_compile=has("tf.function(jit_compile)"),
    knobs=(TF_JIT, TF_TF32), distributions=("tensorflow",),
))
declare_api(Api(
    "numpy", "NumPy", "numpy", ("numpy",),
    {**ARRAY_RECIPES, "selftest": "numpy_api.selftest"},
    quantizer=lacks("NumPy runs float32 only (no bfloat16, mixed or quantized precision)"),
    data_parallel=lacks(NUMPY_ONE_DEVICE), sharded_dataset=lacks(NUMPY_ONE_DEVICE),
    steps_per_execution=lacks(NOT_KERAS),
    ops_compile=lacks("NumPy has no compiler (jit must be false)"), knobs=SELFTEST_KNOBS,
    distributions=("numpy",),
))
declare_api(Api(
    "hf", "Hugging Face on PyTorch", "torch",
    ("torch", "transformers", "diffusers", "peft", "accelerate", "huggingface_hub"),
    {"bert": "hf_api.bert", "sam": "hf_api.sam", "stable_diffusion": "hf_api.stable_diffusion",
     "gemma": "hf_api.gemma", "mistral": "hf_api.mistral"},
    quantizer=has(TORCHAO), data_parallel=has("DistributedDataParallel"),
    sharded_dataset=lacks(NO_NATIVE_SHARDED_DATASET), steps_per_execution=lacks(NOT_KERAS),
    ops_compile=has("torch.compile"), keras_table="native",
    knobs=(COMPILE, FULLGRAPH, TORCH_TF32, FUSED_OPTIMIZER, STATIC_CACHE, ATTENTION),
    distributions=("transformers",),
))
