"""Expected peak device memory of every full-size row of the Keras 3 benchmark table, without a GPU.

    <jax environment's python> benchmarks/peak_memory.py [--rows sam_fit bert_predict ...]
                                                         [--image-size 512] [--size full]

How: XLA's buffer assignment for the compiled step (Keras 3 on JAX, compiled for the CPU backend,
never executed: `jax.jit(step).lower().compile().memory_analysis()`). The model is built inside
the traced function, so its weights are part of the plan (their random initialisation included)
and nothing of that size is ever allocated here — Gemma 7B's 17 GB of bfloat16 weights included.
Each row is the step the runner's worker times, at the batch size and dtype policy of
`matrix.toml` (float32; Gemma and Mistral bfloat16, as the study):

- fit: the loss and its gradients with respect to the trained weights (`value_and_grad` over
  `stateless_call`), plus the optimizer's two Adam/AdamW moments per trained weight added
  analytically (in the weights' dtype, as Keras creates them). SAM and Stable Diffusion train
  their image encoders alone (the study's steps), Gemma and Mistral LoRA rank 4 at 128 tokens.
- predict: the forward pass with every weight of the task resident. Stable Diffusion: one
  denoising step of the MMDiT at batch 2 × b (classifier-free guidance) and the VAE decode at
  batch b, each with all weights of the generate call (CLIP-L, CLIP-G, MMDiT, VAE) resident.
- generate: the forward pass over the whole 50-token sequence (the prefill's shape, the largest
  call of the loop) with every weight resident, plus the key/value cache analytically
  (2 × layers × batch × 50 × key/value heads × head size).

XLA's CPU backend computes bfloat16 products in float32 (with float32 copies of the weights as
temporaries), which a GPU does not: the bfloat16 rows are planned in float32 and their bytes
halved.

A GPU's plan differs in fusion details and each framework's allocator adds its own slack (the
PyTorch backend runs eagerly and keeps what autograd needs, TensorFlow's allocator rounds up):
read the figures as estimates to ±25 %. The script measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GB = 1e9
A100_40, A100_80 = 40e9, 80e9

# (workload, task, batch size, dtype policy): the full-size rows of matrix.toml, Table 2's order.
ROWS = {
    "sam_fit": ("sam", "fit", 1, "float32"),
    "sam_predict": ("sam", "predict", 4, "float32"),
    "sd_fit": ("stable_diffusion", "fit", 8, "float32"),
    "sd_predict": ("stable_diffusion", "predict", 13, "float32"),
    "bert_fit": ("bert", "fit", 32, "float32"),
    "bert_predict": ("bert", "predict", 256, "float32"),
    "gemma_fit": ("gemma", "fit", 8, "bfloat16"),
    "gemma_generate": ("gemma", "generate", 32, "bfloat16"),
    "mistral_fit": ("mistral", "fit", 8, "bfloat16"),
    "mistral_generate": ("mistral", "generate", 32, "bfloat16"),
}
LM_SEQUENCE, LM_MAX_LENGTH, LORA_RANK, BERT_SEQUENCE = 128, 50, 4, 512


def plan_bytes(fn, *abstract_args) -> dict[str, float]:
    """XLA's buffer plan of fn: arguments, outputs and temporaries live at the peak."""
    import jax

    analysis = jax.jit(fn).lower(*abstract_args).compile().memory_analysis()
    out = {k: getattr(analysis, f"{k}_size_in_bytes") for k in ("argument", "output", "temp")}
    out["total"] = out["argument"] + out["output"] + out["temp"]
    return out


def nbytes(tree) -> int:
    import jax

    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def weight_plan(build, run, loss_of=None) -> dict[str, float]:
    """The plan of run(model) with the model's weights as the step's arguments (shapes only: never
    allocated). The model is built again inside the traced step only to have its graph; the
    weights it initialises there are dead code, which XLA removes, and every weight is read from
    the arguments through a StatelessScope. With loss_of: the loss and its gradients with respect
    to the trainable weights, plus the optimizer's two moments per trained weight."""
    import jax
    import keras

    def weights(model):
        return ([v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables])

    trainable_shapes, fixed_shapes = jax.eval_shape(lambda: weights(build()))

    def step(trainable, fixed):
        model = build()

        def value(trainable):
            mapping = list(zip(model.trainable_variables, trainable, strict=True)) + \
                list(zip(model.non_trainable_variables, fixed, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                return run(model)

        if loss_of is None:
            return value(trainable)
        return jax.value_and_grad(lambda t: loss_of(value(t)))(trainable)

    plan = plan_bytes(step, trainable_shapes, fixed_shapes)
    plan["weights"] = nbytes((trainable_shapes, fixed_shapes))
    plan["peak"] = plan["total"]
    if loss_of is not None:
        plan["optimizer_moments"] = 2 * nbytes(trainable_shapes)
        plan["peak"] += plan["optimizer_moments"]
        plan["trained_params"] = sum(int(x.size) for x in trainable_shapes)
    return plan


def fit_plan(build_model, inputs, loss_of) -> dict[str, float]:
    return weight_plan(build_model, lambda model: model(inputs(), training=True), loss_of)


def forward_plan(build_model, inputs, extra_bytes: int = 0) -> dict[str, float]:
    plan = weight_plan(build_model, lambda model: model(inputs(), training=False))
    plan["peak"] += extra_bytes
    return plan


def row_plan(name: str, size: str, side: int) -> dict[str, float]:
    import jax.numpy as jnp
    import keras
    import keras_hub

    from runner.worker.apis.kerashub import configs as hub_configs
    from runner.worker.apis.kerashub import inputs as hub_inputs
    from runner.worker.apis.kerashub import models as hub_models

    workload, task, batch, policy = ROWS[name]
    # XLA's CPU backend computes bfloat16 products in float32 and keeps float32 copies of the
    # weights as temporaries, which no GPU does: a bfloat16 row is planned in float32 and its
    # bytes halved (every weight and activation of these rows is in the policy's dtype).
    keras.config.set_dtype_policy("float32")

    def mse(out):
        return jnp.mean(jnp.square(out.astype("float32")))

    def encoder_trainer(encoder_of, image_side):
        def build():
            encoder = encoder_of()
            images = keras.Input((image_side, image_side, 3))
            return keras.Model(images, encoder(images))
        return build

    if workload == "sam":
        cfg = hub_configs.config(hub_configs.SAM, size)
        sam_side = cfg["image_size"]
        if task == "fit":
            build = encoder_trainer(
                lambda: hub_models.keras_hub_backbone(keras_hub, "sam", size).image_encoder, sam_side)
            return fit_plan(build, lambda: jnp.zeros((batch, sam_side, sam_side, 3)), mse)

        def segmenter():
            backbone = hub_models.keras_hub_backbone(keras_hub, "sam", size)
            model = keras_hub.models.SAMImageSegmenter(backbone=backbone, preprocessor=None)
            return keras.Model(model.input, model.output)

        mask_side = 4 * (sam_side // cfg["encoder"]["patch_size"])
        shapes = {k: v.shape for k, v in hub_inputs.sam_inputs(0, batch, sam_side, mask_side).items()}
        return forward_plan(segmenter, lambda: {k: jnp.zeros(s) for k, s in shapes.items()})

    if workload == "stable_diffusion":
        def sd():
            return hub_models.keras_hub_backbone(keras_hub, "stable_diffusion", size, side)

        if task == "fit":
            return fit_plan(encoder_trainer(lambda: sd().vae.encoder, side),
                            lambda: jnp.zeros((batch, side, side, 3)), mse)
        latent = side // 8

        def denoise(backbone):
            mmdit, b = backbone.diffuser, 2 * batch
            context = 2 * int(backbone.clip_l.max_sequence_length)   # CLIP-L + CLIP-G tokens

            def zeros(spec):
                shape = [b] + [d if d is not None else context for d in spec.shape[1:]]
                if spec.name.startswith("latent"):
                    shape[1:3] = [latent, latent]
                return jnp.zeros(shape, spec.dtype)

            import jax
            return mmdit(jax.tree.map(zeros, mmdit.input), training=False)

        def decode(backbone):
            return backbone.vae.decode(jnp.zeros((batch, latent, latent, 16)))

        # every weight of the generate call (CLIP-L, CLIP-G, MMDiT, VAE) is an argument: resident
        denoising, decoding = weight_plan(sd, denoise), weight_plan(sd, decode)
        return {"weights": denoising["weights"], "denoise_step_total": denoising["total"],
                "decode_total": decoding["total"],
                "peak": max(denoising["total"], decoding["total"])}

    if workload == "bert":
        length = min(BERT_SEQUENCE, hub_configs.config(hub_configs.BERT, size)["max_sequence_length"])
        shapes = {k: (batch, length) for k in ("token_ids", "segment_ids", "padding_mask")}

        def classifier():
            backbone = hub_models.keras_hub_backbone(keras_hub, "bert", size)
            return keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)

        def inputs():
            return {k: jnp.zeros(s, "int32") for k, s in shapes.items()}

        if task == "fit":
            def cross_entropy(logits):
                return -jnp.mean(jax_nn_log_softmax(logits)[:, 0])
            return fit_plan(classifier, inputs, cross_entropy)
        return forward_plan(classifier, inputs)

    # Gemma and Mistral
    table, backbone_name = (hub_configs.GEMMA, "GemmaBackbone") if workload == "gemma" \
        else (hub_configs.MISTRAL, "MistralBackbone")
    cfg = hub_configs.config(table, size)
    backbone_cls = getattr(keras_hub.models, backbone_name)
    lm_cls = getattr(keras_hub.models, backbone_name.replace("Backbone", "CausalLM"))
    length = LM_SEQUENCE if task == "fit" else LM_MAX_LENGTH

    def lm(lora: bool):
        def build():
            backbone = backbone_cls(**cfg)
            if lora:
                backbone.enable_lora(rank=LORA_RANK)
            return lm_cls(backbone=backbone, preprocessor=None)
        return build

    def inputs():
        return {"token_ids": jnp.zeros((batch, length), "int32"),
                "padding_mask": jnp.ones((batch, length), "int32")}

    if task == "fit":
        def next_token_loss(logits):
            return -jnp.mean(jax_nn_log_softmax(logits.astype("float32"))[..., 0])
        return fit_plan(lm(lora=True), inputs, next_token_loss)
    kv_heads = cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_dim"] // cfg["num_query_heads"]
    cache = 2 * cfg["num_layers"] * batch * LM_MAX_LENGTH * kv_heads * head_dim * 4  # float32
    plan = forward_plan(lm(lora=False), inputs, extra_bytes=cache)
    plan["kv_cache"] = cache
    return plan


def jax_nn_log_softmax(x):
    import jax

    return jax.nn.log_softmax(x, axis=-1)


def arguments(doc: str) -> argparse.Namespace:
    """The command line both planners take (this one and peak_memory_hf.py)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--image-size", type=int, default=512, help="Stable Diffusion's side")
    parser.add_argument("--size", default="full", choices=("full", "small", "tiny"))
    return parser.parse_args()


def print_plans(rows: list[str], plan_of, peak_key: str = "peak") -> None:
    """One line per row: its peak, whether it fits a 40 / 80 GB A100, its parts in GB."""
    print(f"{'row':<18} {'batch':>5} {'dtype':>8} {'peak GB':>8}  fits 40 GB / 80 GB   parts (GB)")
    for name in rows:
        started = time.perf_counter()
        plan = plan_of(name)
        _, _, batch, policy = ROWS[name]
        peak = plan[peak_key]
        parts = {k: round(v / GB, 2) if isinstance(v, (int, float)) and k != "trained_params"
                 else v for k, v in plan.items() if k != peak_key}
        fits = f"{'yes' if peak <= A100_40 else 'no':>3} / {'yes' if peak <= A100_80 else 'no':<3}"
        print(f"{name:<18} {batch:>5} {policy:>8} {peak / GB:>8.1f}  {fits:<19} "
              f"{json.dumps(parts)} ({time.perf_counter() - started:.0f} s to plan)", flush=True)


def main() -> None:
    args = arguments(__doc__)

    def plan_of(name: str) -> dict[str, float]:
        plan = row_plan(name, args.size, args.image_size)
        if ROWS[name][3] == "bfloat16":
            plan = {k: v if k == "trained_params" else v / 2 for k, v in plan.items()}
        return plan

    print_plans(args.rows, plan_of)


if __name__ == "__main__":
    main()
