"""keras-hub StableDiffusion3 (stable_diffusion_3_medium architecture) on Keras 3. The study used
keras-cv's Stable Diffusion v1.4, which keras-hub does not provide; SD3 medium is keras-hub's
Stable Diffusion, so the Keras 3 column measures a different (larger) model than the Keras 2 one.
Images are options.image_size square: 512 at full size, the study's scale (1024, SD3's native
size, is one option away).

predict: text-to-image generate on prompt token ids (preprocessor=None: the CLIP tokenizer needs
TensorFlow, and nothing is downloaded), num_steps denoising steps per call with classifier-free
guidance; a sample is time per denoising step (call time / num_steps).
fit: the study's training step (keras-hub raises NotImplementedError for SD3 fit): the VAE image
encoder alone regresses fixed random targets of its output shape, MSE, Adam.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub import stable_diffusion as recipe
from ..kerashub.benches import jit_in_effect
from ..kerashub.inputs import seed_weights, token_batch
from ..kerashub.models import keras_hub_backbone, local_preset
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    import keras_hub

    batch, options = spec.batch_size, spec.options
    preset = local_preset(options)
    side = int(options["image_size"])
    if preset:
        backbone = keras_hub.models.StableDiffusion3Backbone.from_preset(preset,
                                                                        image_shape=(side, side, 3))
    else:
        backbone = keras_hub_backbone(keras_hub, "stable_diffusion", spec.size, side)
    latent_shape = tuple(int(d) for d in backbone.latent_shape[1:])
    facts = dict(batch_size=batch, image_size=int(backbone.image_shape[0]),
                 latent_shape=list(latent_shape), params=backbone.count_params(),
                 preset=preset or f"random weights, {spec.size} config")
    seed_weights(backbone, spec, facts, preset)

    if spec.task == "fit":
        return recipe.fit_bench(spec, fw, backbone.vae.encoder, side, facts)

    num_steps = int(options["num_steps"])
    guidance = float(options.get("guidance_scale", 7.0))
    length = int(backbone.clip_l.max_sequence_length)
    vocab = int(backbone.clip_l.vocabulary_size)
    prompts = {name: token_batch(spec.seed, batch, length, vocab) for name in ("clip_l", "clip_g")}
    negative = {name: np.zeros((batch, length), np.int32) for name in ("clip_l", "clip_g")}
    facts.update(num_steps=num_steps, guidance_scale=guidance, prompt_length=length)
    models: dict[int, Any] = {}

    def generate_with(steps: int):
        """One text-to-image model per step count over the one backbone: TensorFlow and JAX
        compile the scheduler's table for the step count a model first ran (on TensorFlow a
        changed num_steps fails until generate_function is reset, which would recompile)."""
        model = models.get(steps)
        if model is None:
            model = keras_hub.models.StableDiffusion3TextToImage(backbone=backbone,
                                                                 preprocessor=None)
            model.compile(jit_compile=fw.jit_compile())
            models[steps] = model

        def generate():
            return model.generate({"prompts": dict(prompts), "negative_prompts": dict(negative)},
                                  num_steps=steps, guidance_scale=guidance, seed=spec.seed)
        return generate

    # Its answer: the images' norms. The initial latents come from each backend's own random
    # generator, so the backends' images differ by design (matrix.toml: check_answers = false).
    bench = recipe.predict_bench(generate_with, batch=batch, num_steps=num_steps, facts=facts,
                                 effective={"image_size": side})
    bench.effective["jit_compile"] = jit_in_effect(models[num_steps])
    return bench
