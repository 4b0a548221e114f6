"""Every axis a benchmark may vary, declared once: name, how its values are checked, its type in
a cell spec and a record, its default, the words it allows. Where a value does not apply is in
rules.py. A list of values in a benchmark yields one cell per value (cartesian product)."""

from __future__ import annotations

from .base import Axis, declare_axis
from .precisions import FLOAT_PRECISIONS, QUANTIZED_PRECISIONS

# The layer workload's phases are tasks too (catalog/layers.py PHASES): forward, a train step
# (forward, backward and the optimizer's update) and backward alone.
TASKS = ("fit", "predict", "generate", "run", "forward", "train", "backward")
PRECISIONS = FLOAT_PRECISIONS + QUANTIZED_PRECISIONS
SIZES = ("full", "small", "tiny")
DATA_MODES = ("arrays", "dataset", "device")
DEVICES = ("auto", "gpu", "cpu")
SCALINGS = ("weak", "strong")
TIERS = ("defaults", "tuned")
TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
JIT_WORDS = ("auto",) + TORCH_COMPILE_MODES

declare_axis(Axis("task", "choice", str, values=TASKS, per_workload=True,
                  help="what the workload does: fit | predict | generate | run; a layer's phase: "
                       "forward | train | backward"))
declare_axis(Axis("batch_size", "positive_int", int, per_workload=True,
                  help="samples per step: required for model workloads, else 1 by default"))
declare_axis(Axis("precision", "choice", str, "float32", PRECISIONS, short="",
                  help="float32 | bfloat16 | mixed_float16 | mixed_bfloat16, or quantized: int8 | "
                       "int8_weight_only | int4 | float8 (from float32), each also "
                       "<mode>_from_bfloat16 (docs/quantized.md)"))
declare_axis(Axis("jit", "bool_or_choice", bool | str, "auto", JIT_WORDS,
                  help='true | false | "auto" (the framework\'s default) | a torch.compile mode'))
declare_axis(Axis("size", "choice", str, "full", SIZES,
                  help="full | small | tiny: the workloads' size presets"))
# None keeps the framework's own default (recorded as the value in effect).
declare_axis(Axis("tf32", "bool", bool | None, None,
                  help="float32 matmuls and convolutions may run as TF32"))
declare_axis(Axis("steps_per_execution", "positive_int", int, 1, short="spe",
                  help="Keras: training or predict steps per compiled call"))
# The same work in every API by default: the training set already on the device, so no timed
# step of a native loop copies its batch from the host ("arrays" does, while Keras fit overlaps
# that copy in its own pipeline).
declare_axis(Axis("data", "choice", str, "device", DATA_MODES,
                  help="arrays | dataset | device: how a training loop is fed"))
# "auto" takes the GPU when the environment has one.
declare_axis(Axis("device", "choice", str, "auto", DEVICES, help="auto | gpu | cpu"))
# Data-parallel cells (docs/scaling.md): one cell holds `devices` GPUs (on a CPU, as many virtual
# devices) and trains one model on all of them in its framework's own way. weak: `batch_size` per
# device (the global batch grows with the devices, as the Keras and PyTorch guides do); strong:
# `batch_size` is the global batch, split over the devices. At devices = 1 both are one device's
# batch_size.
declare_axis(Axis("devices", "positive_int", int, 1,
                  help="devices one data-parallel cell trains on (GPUs, or virtual CPU devices)"))
declare_axis(Axis("scaling", "choice", str, "weak", SCALINGS,
                  help="weak (batch_size per device) | strong (batch_size in all)"))
# The tuned tier (docs/tuned.md): "defaults" is the cell as the matrix gives it, every framework
# default in force; "tuned" is the same cell with the knobs its API declares (catalog/apis.py)
# set to what `python -m runner tune` found best within the same budget for every environment.
declare_axis(Axis("tier", "choice", str, "defaults", TIERS,
                  help="defaults | tuned: the frameworks' defaults, or their best knobs within "
                       "the tuning budget (docs/tuned.md)"))
