"""Expected peak memory of the Stable Diffusion rows at the study's scale, without a GPU.

    <jax environment's python> benchmarks/sd_memory.py [--image-size 512] [--fit-batch 8] [--predict-batch 13]

How: XLA's buffer assignment for the compiled step (Keras 3 on JAX, compiled for the CPU backend,
never executed: `jax.jit(step).lower().compile().memory_analysis()`). The model is built inside
the traced function, so its weights are part of the plan (random initialisation included) and
nothing of that size is allocated. fit: the study's step (VAE image encoder, MSE, gradients; Adam's
two moments added analytically: 2 × 4 bytes × trained parameters). predict: one denoising step of
the MMDiT at batch 2 × b (classifier-free guidance), and the VAE decode at batch b, each with all
weights of the generate call (CLIP-L, CLIP-G, MMDiT, VAE) resident. A GPU's plan differs in
fusion details; read these as estimates to ±25 %.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GB = 1e9


def plan_bytes(fn) -> dict[str, float]:
    import jax

    analysis = jax.jit(fn).lower().compile().memory_analysis()
    out = {k: getattr(analysis, f"{k}_size_in_bytes") for k in ("argument", "output", "temp",
                                                               "generated_code")}
    out["total"] = out["argument"] + out["output"] + out["temp"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=512)
    parser.add_argument("--fit-batch", type=int, default=8)
    parser.add_argument("--predict-batch", type=int, default=13)
    parser.add_argument("--size", default="full")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    import keras
    import keras_hub

    from runner.worker.apis import kerashub_models as hub

    side, report = args.image_size, {}

    def build():
        return hub.keras_hub_backbone(keras_hub, "stable_diffusion", args.size, side)

    def fit_step():
        backbone = build()
        encoder = backbone.vae.encoder
        images = keras.Input((side, side, 3))
        model = keras.Model(images, encoder(images))
        x = jnp.zeros((args.fit_batch, side, side, 3))
        trainable = [v.value for v in model.trainable_variables]
        fixed = [v.value for v in model.non_trainable_variables]

        def loss(weights):
            y, _ = model.stateless_call(weights, fixed, x, training=True)
            return jnp.mean(jnp.square(y))

        return jax.value_and_grad(loss)(trainable)

    counted = {}

    def count():
        backbone = build()
        counted["encoder"] = backbone.vae.encoder.count_params()
        counted["all"] = backbone.count_params()
        return 0

    jax.eval_shape(count)
    fit = plan_bytes(fit_step)
    fit["adam_moments"] = 2 * 4 * counted["encoder"]
    fit["peak"] = fit["total"] + fit["adam_moments"]
    report["fit"] = {"batch": args.fit_batch, **{k: v / GB for k, v in fit.items()}}

    latent = side // 8

    def denoise_step():
        backbone = build()
        b = 2 * args.predict_batch
        mmdit = backbone.diffuser
        context = 2 * int(backbone.clip_l.max_sequence_length)   # CLIP-L + CLIP-G tokens

        def zeros(spec):
            shape = [b] + [d if d is not None else context for d in spec.shape[1:]]
            if spec.name.startswith("latent"):
                shape[1:3] = [latent, latent]
            return jnp.zeros(shape, spec.dtype)

        out = mmdit(jax.tree.map(zeros, mmdit.input), training=False)
        # every weight of the generate call stays resident
        return out, [v.value for v in backbone.weights]

    def decode_step():
        backbone = build()
        images = backbone.vae.decode(jnp.zeros((args.predict_batch, latent, latent, 16)))
        return images, [v.value for v in backbone.weights]

    denoise, decode = plan_bytes(denoise_step), plan_bytes(decode_step)
    report["predict"] = {"batch": args.predict_batch,
                         "denoise_step_total": denoise["total"] / GB,
                         "decode_total": decode["total"] / GB,
                         "peak": max(denoise["total"], decode["total"]) / GB}
    report["parameters"] = counted
    report["image_size"] = side
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
