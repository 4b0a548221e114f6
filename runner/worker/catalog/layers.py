"""The layer family's one table: every layer the `layer` workload times, by its Keras class name
(options.layer), with its constructor arguments and its inputs per shape set (options.shapes).
Standard library only: the host validates options.layer and plans the not-applicable cells from
it; the worker builds the Keras layer and every native twin from it (apis/layer_common.py has
the weights and the phases, each API's `layer.py` its twins).

Shape sets (docs/layers.md):
- `small`: keras's own layer benchmarks' shapes (keras/benchmarks/layer_benchmark/*.py, e.g.
  Dense on [256, 256] per sample, Conv2D(16, 2) on [128, 128, 4], MultiHeadAttention(4 heads,
  key_dim 16) on [256, 64], LSTM(32) on [256, 256]): small enough that the framework's dispatch,
  not the arithmetic, decides the time — they measure the framework's own overhead. Where
  keras's shape would make a CPU cell take seconds, a lighter one stands in, said in `note`.
- `model`: the sizes inside the catalog's models (a 4096² projection at sequence 128, BERT's
  attention at 128 tokens, Mistral's at 2048, a Stable Diffusion VAE convolution): the kernels
  decide the time (bfloat16 on a GPU).
- `tiny`: a few numbers per input, for the tests and smoke runs on a CPU.

Inputs are per sample: the cell's batch_size is their leading axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHAPE_SETS = ("tiny", "small", "model")
# The phases (the task axis's values for this workload, catalog/axes.py).
PHASES = ("forward", "train", "backward")
FAMILIES = ("core", "convolution", "pooling", "normalization", "attention", "recurrent",
            "merging", "reshaping", "regularization", "activation", "llm")
KERAS2 = "tf-keras"


@dataclass(frozen=True)
class Shapes:
    """One shape set of a layer: its inputs per sample, and its constructor arguments there
    (over the layer's own `args`)."""

    inputs: tuple[tuple[int, ...], ...]
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Layer:
    name: str                      # options.layer: the Keras class name (or the recipe's)
    family: str                    # one of FAMILIES
    shapes: dict[str, Shapes]      # shape set → its inputs and arguments
    args: dict[str, Any] = field(default_factory=dict)   # constructor arguments, every set
    # Where Keras has it: "keras.layers" (a class of that name), "keras_hub.layers" (keras-hub's),
    # or "recipe" (made of Keras layers by apis/layer_keras.py: no single Keras class exists).
    keras: str = "keras.layers"
    keras_class: str = ""          # the class, where its name is not `name` (CausalSelfAttention)
    call: dict[str, Any] = field(default_factory=dict)   # keyword arguments of its call
    # How several inputs reach it: "args" (layer(query, value)) or "list" (layer([a, b])).
    inputs_as: str = "args"
    # Which input each positional argument of its call is (): each input once, in order;
    # (0, 0): self-attention, layer(x, x)).
    call_inputs: tuple[int, ...] = ()
    ids: bool = False              # its input is token ids below args["input_dim"] (Embedding)
    trainable: bool = True         # has weights (a train step changes something)
    # Draws random numbers in training mode (each framework its own generator): its backward
    # answer is not compared.
    random: bool = False
    missing: dict[str, str] = field(default_factory=dict)   # API → why it has no such layer
    note: str = ""                 # where a shape departs from keras's benchmark, and why

    def arguments(self, shapes: str) -> dict[str, Any]:
        """Its constructor arguments at a shape set."""
        return {**self.args, **self.shapes[shapes].args}

    def inputs(self, shapes: str) -> tuple[tuple[int, ...], ...]:
        return self.shapes[shapes].inputs

    @property
    def class_name(self) -> str:
        return self.keras_class or self.name


LAYERS: dict[str, Layer] = {}


def declare_layer(layer: Layer) -> Layer:
    if layer.family not in FAMILIES:
        raise ValueError(f"layer {layer.name}: family {layer.family!r} is not one of {FAMILIES}")
    if set(layer.shapes) != set(SHAPE_SETS):
        raise ValueError(f"layer {layer.name}: shape sets {sorted(layer.shapes)}, expected "
                         f"{list(SHAPE_SETS)}")
    LAYERS[layer.name] = layer
    return layer


def one(*shape: int) -> tuple[tuple[int, ...], ...]:
    return (tuple(shape),)


def two(*shape: int) -> tuple[tuple[int, ...], ...]:
    return (tuple(shape), tuple(shape))


def S(inputs: tuple[tuple[int, ...], ...], **args: Any) -> Shapes:    # noqa: N802 (a table's)
    return Shapes(inputs, args)


NO_WEIGHTS = "has no weights"
NO_GQA_2 = "Keras 2 (tf-keras) has no GroupQueryAttention (Keras 3 added it)"
NO_RMS_2 = "Keras 2 (tf-keras) has no RMSNormalization (Keras 3 added it)"
NO_ROPE_2 = ("Keras 2 (tf-keras) has no rotary embedding layer (keras-hub's is Keras 3 only; "
             "keras-nlp 0.8's is in the keras2-tf215 image only)")

# --- core ---------------------------------------------------------------------------------------
declare_layer(Layer("Dense", "core", {
    "tiny": S(one(3, 8), units=8), "small": S(one(256, 256), units=256),
    "model": S(one(128, 4096), units=4096)}))
declare_layer(Layer("EinsumDense", "core", {
    "tiny": S(one(3, 8), output_shape=[None, 8]), "small": S(one(64, 32), output_shape=[None, 128]),
    "model": S(one(128, 4096), output_shape=[None, 4096])},
    args={"equation": "abc,cd->abd", "bias_axes": "d"}))
declare_layer(Layer("Embedding", "core", {
    "tiny": S(one(5), input_dim=16, output_dim=8), "small": S(one(32), input_dim=30, output_dim=128),
    "model": S(one(128), input_dim=32000, output_dim=4096)}, ids=True))

# --- convolution ----------------------------------------------------------------------------------
declare_layer(Layer("Conv1D", "convolution", {
    "tiny": S(one(8, 3), filters=4), "small": S(one(256, 16), filters=16),
    "model": S(one(1024, 512), filters=512, kernel_size=3, padding="same")}, {"kernel_size": 2}))
declare_layer(Layer("Conv2D", "convolution", {
    "tiny": S(one(6, 6, 3), filters=4), "small": S(one(128, 128, 4), filters=16),
    "model": S(one(64, 64, 256), filters=256, kernel_size=3, padding="same")},
    {"kernel_size": 2}))
declare_layer(Layer("Conv3D", "convolution", {
    "tiny": S(one(4, 4, 4, 2), filters=3), "small": S(one(32, 32, 32, 4), filters=16),
    "model": S(one(16, 32, 32, 64), filters=64, kernel_size=3, padding="same")},
    {"kernel_size": 2}))
declare_layer(Layer("DepthwiseConv2D", "convolution", {
    "tiny": S(one(6, 6, 3)), "small": S(one(128, 128, 4)), "model": S(one(64, 64, 512))},
    {"kernel_size": 3, "depth_multiplier": 2},
    note="kernel 3 where keras's benchmark takes 16 (256 multiply-adds a pixel: seconds a step "
         "on a CPU)"))
declare_layer(Layer("Conv2DTranspose", "convolution", {
    "tiny": S(one(5, 5, 3), filters=4), "small": S(one(128, 128, 4), filters=16),
    "model": S(one(64, 64, 256), filters=128, strides=2)}, {"kernel_size": 2}))

# --- pooling --------------------------------------------------------------------------------------
for _name in ("MaxPooling2D", "AveragePooling2D"):
    declare_layer(Layer(_name, "pooling", {
        "tiny": S(one(6, 6, 3)), "small": S(one(256, 256, 3)), "model": S(one(64, 64, 256))},
        {"pool_size": 2}, trainable=False))

# --- normalization --------------------------------------------------------------------------------
declare_layer(Layer("BatchNormalization", "normalization", {
    "tiny": S(one(4, 6)), "small": S(one(256, 256, 4)), "model": S(one(64, 64, 256))}))
declare_layer(Layer("LayerNormalization", "normalization", {
    "tiny": S(one(4, 6)), "small": S(one(256, 256)), "model": S(one(128, 4096))}))
declare_layer(Layer("GroupNormalization", "normalization", {
    "tiny": S(one(4, 4, 4), groups=2), "small": S(one(256, 256, 4), groups=2),
    "model": S(one(64, 64, 256), groups=32)}))

# --- attention ------------------------------------------------------------------------------------
declare_layer(Layer("MultiHeadAttention", "attention", {
    "tiny": S(two(5, 8), num_heads=2, key_dim=4), "small": S(two(256, 64), num_heads=4, key_dim=16),
    "model": S(two(128, 768), num_heads=12, key_dim=64)}))        # BERT base, 128 tokens
declare_layer(Layer("GroupQueryAttention", "attention", {
    "tiny": S(two(5, 8), head_dim=4, num_query_heads=4, num_key_value_heads=2),
    "small": S(two(256, 64), head_dim=16, num_query_heads=4, num_key_value_heads=2),
    "model": S(two(2048, 4096), head_dim=128, num_query_heads=32, num_key_value_heads=8)},
    missing={KERAS2: NO_GQA_2}))                                  # Mistral 7B, 2048 tokens

# --- recurrent ------------------------------------------------------------------------------------
for _name in ("LSTM", "GRU"):
    declare_layer(Layer(_name, "recurrent", {
        "tiny": S(one(5, 3), units=4), "small": S(one(256, 256), units=32),
        "model": S(one(128, 512), units=512)}))

# --- merging --------------------------------------------------------------------------------------
for _name in ("Add", "Concatenate"):
    declare_layer(Layer(_name, "merging", {
        "tiny": S(two(3, 4)), "small": S(two(256, 256)), "model": S(two(128, 4096))},
        inputs_as="list", trainable=False))

# --- reshaping ------------------------------------------------------------------------------------
declare_layer(Layer("Flatten", "reshaping", {
    "tiny": S(one(3, 4)), "small": S(one(128, 128, 4)), "model": S(one(64, 64, 256))},
    trainable=False))
declare_layer(Layer("UpSampling2D", "reshaping", {
    "tiny": S(one(3, 3, 2)), "small": S(one(64, 64, 4)), "model": S(one(64, 64, 256))},
    {"size": 2}, trainable=False))

# --- regularization -------------------------------------------------------------------------------
declare_layer(Layer("Dropout", "regularization", {
    "tiny": S(one(3, 4)), "small": S(one(256, 256)), "model": S(one(128, 4096))},
    {"rate": 0.5}, trainable=False, random=True))

# --- activations ----------------------------------------------------------------------------------
for _name in ("ReLU", "Softmax"):
    declare_layer(Layer(_name, "activation", {
        "tiny": S(one(3, 4)), "small": S(one(256, 256)), "model": S(one(128, 4096))},
        trainable=False))

# --- what LLMs are made of ------------------------------------------------------------------------
declare_layer(Layer("RMSNormalization", "llm", {
    "tiny": S(one(4, 6)), "small": S(one(256, 256)), "model": S(one(128, 4096))},
    {"epsilon": 1e-6}, missing={KERAS2: NO_RMS_2}))
declare_layer(Layer("RotaryEmbedding", "llm", {                  # (sequence, heads, head_dim)
    "tiny": S(one(5, 2, 4)), "small": S(one(256, 4, 16)), "model": S(one(2048, 32, 128))},
    {"max_wavelength": 10000}, keras="keras_hub.layers", trainable=False,
    missing={KERAS2: NO_ROPE_2}))
declare_layer(Layer("SwiGLUFeedForward", "llm", {
    "tiny": S(one(3, 8), intermediate_dim=16), "small": S(one(256, 64), intermediate_dim=256),
    "model": S(one(128, 4096), intermediate_dim=14336)}, keras="recipe"))   # Mistral 7B's
declare_layer(Layer("CausalSelfAttention", "llm", {
    "tiny": S(one(5, 8), num_heads=2, key_dim=4), "small": S(one(256, 64), num_heads=4, key_dim=16),
    "model": S(one(2048, 4096), num_heads=32, key_dim=128)},
    keras_class="MultiHeadAttention", call={"use_causal_mask": True}, call_inputs=(0, 0)))


def not_applicable(layer: str, api: str, task: str) -> str | None:
    """Why a layer cell does not apply: an API without the layer, or a train step of a layer
    without weights."""
    known = LAYERS.get(layer)
    if known is None:
        return None                     # the schema refuses an unknown name first
    if api in known.missing:
        return known.missing[api]
    if task == "train" and not known.trainable:
        return f"{layer} {NO_WEIGHTS}: a train step would only run its forward pass and loss " \
               "(its gradient is the backward phase's)"
    return None
