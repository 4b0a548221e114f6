"""Every workload, declared once: tasks, precisions, options, size presets, and the APIs where it
is not applicable on purpose. Which APIs run it, and with which module, each API's record says
(apis.py: its `workloads`); the shared recipes behind the modules: apis/matmul_common.py,
apis/elementwise_common.py, apis/cnn_common.py, apis/kerashub/."""

from __future__ import annotations

from .axes import PRECISIONS
from .precisions import FLOAT_PRECISIONS
from .base import Option, Workload, declare_workload
from .layers import LAYERS, PHASES, SHAPE_SETS

_HUB_OPTIONS = {
    "preset": Option(str, "local folder of a keras-hub (Keras 2: keras-nlp/keras-cv) preset to "
                          "load weights from; never a hub name (nothing is downloaded)",
                     local_path=True),
}

declare_workload(Workload(
    "matmul", ("run",), False, ("float32", "bfloat16"),
    {"n": Option(int, "matrix side (default by size: full 4096, small 1024, tiny 256)", True),
     "to_host": Option(bool, "copy the product back to host memory inside the timed step")},
    help="n×n matrix product; batch_size independent products per step", family="ops",
    sizes={"full": {"n": 4096}, "small": {"n": 1024}, "tiny": {"n": 256}},
))
declare_workload(Workload(
    "elementwise", ("run",), False, ("float32", "bfloat16"),
    {"n": Option(int, "elements (default by size: full 2**24, small 2**20, tiny 2**14)", True)},
    help="SELU over a large array: eager op-by-op versus compiled", family="ops",
    sizes={"full": {"n": 2**24}, "small": {"n": 2**20}, "tiny": {"n": 2**14}},
    dense_paths=(),                        # memory-bound: no TF32, no % of a matmul peak
))
declare_workload(Workload(
    "selftest", ("run",), False, ("float32",),
    {"behaviour": Option(str, "ok | fail | crash | hang | orphan | flood: what the step does"),
     "sleep_ms": Option(float, "how long an ok (orphan, flood) step sleeps", True),
     "marker": Option(str, "orphan: a word in the command line of the process it leaves "
                           "behind"),
     "flood_mb": Option(float, "flood: megabytes printed before the first step", True),
     "memory_batches": Option(int, "the largest batch that fits: a larger one runs out of "
                                   "memory (the tuned tier's batch search)", True)},
    help="diagnostic: checks the runner itself (statuses, timeouts, resume) in seconds",
    family="diagnostic", dense_paths=(),
))
declare_workload(Workload(
    "cnn", ("fit", "predict"), True, PRECISIONS,
    {"samples": Option(int, "training samples per epoch (default by size)", True),
     "grad_scaler": Option(bool, "torch mixed_float16: use torch.amp.GradScaler")},
    uses_data_axis=True, data_parallel=("fit",),
    help="4 Conv2D + 2 Dense layers (~563 k parameters) on 28×28×1 synthetic data; predict: "
         "one batch of held-out images through the forward pass (the quantized tier's small "
         "model)",
    sizes={"full": {"samples": 60_000}, "small": {"samples": 8_192}, "tiny": {"samples": 1_024}},
    dense_paths=("conv", "matmul"),        # ~97 % of its FLOPs in the convolutions
    default_task="fit",
))

# keras-hub models (the Keras 3 benchmark table). Keras 3 runs keras-hub 0.32; Keras 2 ("tf-keras"
# api, image keras2-tf215) runs the same configurations with keras-nlp / keras-cv 0.8, which have
# no Gemma or Mistral. Full sizes are the study's settings (BERT sequence length 512; Gemma and
# Mistral fit at sequence length 128 with LoRA rank 4, generate to length 50; SD denoising steps
# per predict call); tiny keeps the shapes small for CPU smoke runs. The "hf" api (images/hf-torch)
# runs the same five models with Hugging Face's code on native PyTorch (transformers, diffusers,
# peft), built from the same configurations: the "Keras over native" columns.
declare_workload(Workload(
    "bert", ("fit", "predict"), True, PRECISIONS,
    {**_HUB_OPTIONS,
     "sequence_length": Option(int, "tokens per sample (default: full 512, tiny 32)", True)},
    help="BERT text classifier, bert_base_en_uncased architecture (109 482 240 parameters, "
         "vocabulary 30 522; random weights); expected peaks, float32, 512 tokens: fit b32 "
         "~26 GB, predict b256 ~7 GB (benchmarks/peak_memory.py; hf: ~27 GB and ~5 GB, "
         "benchmarks/peak_memory_hf.py)",
    family="hub", data_parallel=("fit", "predict"),
    sizes={"full": {"sequence_length": 512}, "small": {"sequence_length": 128},
           "tiny": {"sequence_length": 32}},
))
declare_workload(Workload(
    "sam", ("fit", "predict"), True, FLOAT_PRECISIONS,
    dict(_HUB_OPTIONS),
    help="SegmentAnything, sam_huge_sa1b architecture (ViT-H image encoder); fit trains the "
         "image encoder alone against random embedding targets, as the study did; expected "
         "peaks, float32, 1024×1024: fit b1 ~50 GB before the GPU compiler's rematerialisation "
         "(the study ran it on 40 GB), predict b4 ~4 GB (benchmarks/peak_memory.py; hf: ~29 GB "
         "and ~12 GB, benchmarks/peak_memory_hf.py)",
    family="hub", dense_paths=("conv", "matmul"),    # patch embedding and neck convolutions
))
declare_workload(Workload(
    "stable_diffusion", ("fit", "predict"), True, FLOAT_PRECISIONS,
    {**_HUB_OPTIONS,
     "num_steps": Option(int, "predict: denoising steps per generate call (time is per "
                              "denoising step)", True),
     "guidance_scale": Option(float, "predict: classifier-free guidance scale", True),
     "image_size": Option(int, "image side: full 512 (the study's scale; SD3's native 1024 is "
                               "one option away), small 256, tiny 64; Keras 3 (SD3) needs a "
                               "multiple of 16, Keras 2 (SD v1.4) of 128", True)},
    help="StableDiffusion3 medium (Keras 2: keras-cv Stable Diffusion v1.4); fit trains the VAE "
         "image encoder as the study did; expected peaks at the study's batch sizes, float32, "
         "512×512: fit b8 ~34 GB, predict b13 ~19 GB (XLA's buffer plan, "
         "benchmarks/peak_memory.py): both fit a 40 GB A100 (hf: ~26 GB and ~22 GB, "
         "benchmarks/peak_memory_hf.py)",
    family="hub",
    sizes={"full": {"num_steps": 25, "image_size": 512},
           "small": {"num_steps": 10, "image_size": 256},
           "tiny": {"num_steps": 2, "image_size": 64}},
    dense_paths=("conv", "matmul"),        # the VAE's convolutions, the MMDiT's matmuls
))
for _name, _help in (
    ("gemma", "Gemma causal LM, gemma_7b_en architecture; fit with LoRA; expected peaks, "
              "bfloat16: fit b8 ~29 GB, generate b32 ~22 GB (benchmarks/peak_memory.py; hf: "
              "~26 GB and ~19 GB, benchmarks/peak_memory_hf.py)"),
    ("mistral", "Mistral causal LM, mistral_7b_en architecture; fit with LoRA; expected peaks, "
                "bfloat16: fit b8 ~24 GB, generate b32 ~16 GB (benchmarks/peak_memory.py; hf: "
                "~20 GB and ~15 GB, benchmarks/peak_memory_hf.py)"),
):
    declare_workload(Workload(
        _name, ("fit", "generate"), True, PRECISIONS,
        {**_HUB_OPTIONS,
         "sequence_length": Option(int, "fit: tokens per sample (default 128)", True),
         "max_length": Option(int, "generate: total sequence length (default 50)", True),
         "lora_rank": Option(int, "fit: LoRA rank (default 4; 0 trains every weight)")},
        help=_help, family="hub",
        sizes={size: {"sequence_length": 32 if size == "tiny" else 128, "max_length": 50,
                      "lora_rank": 4} for size in ("full", "small", "tiny")},
        not_applicable={"tf-keras": "Keras 2 (keras-nlp 0.8) has no Gemma or Mistral"},
    ))

# One layer of keras's families (or of an LLM) on its seeded weights and inputs: the Keras layer
# on the Keras APIs, its native twin with the same weights on torch, JAX and TensorFlow
# (catalog/layers.py the table, apis/layer_common.py the recipe, docs/layers.md).
declare_workload(Workload(
    "layer", PHASES, False, ("float32", "bfloat16"),
    {"layer": Option(str, "the layer, by its Keras class name (docs/layers.md lists them)",
                     choices=tuple(LAYERS), names_the_work=True),
     "shapes": Option(str, "tiny | small (keras's benchmark shapes: the framework's overhead) | "
                           "model (the catalog's models' sizes: the kernels); default by size: "
                           "full model, small small, tiny tiny", choices=SHAPE_SETS)},
    help="one layer (options.layer) timed by phase: forward, train (forward, backward, SGD "
         "step) or backward; Keras's layer against its native twin with the same weights",
    family="layer", default_task="forward",
    sizes={"full": {"shapes": "model"}, "small": {"shapes": "small"},
           "tiny": {"shapes": "tiny"}},
    dense_paths=("matmul", "conv"),
))
