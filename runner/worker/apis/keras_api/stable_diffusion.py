"""keras-hub StableDiffusion3 (stable_diffusion_3_medium architecture) on Keras 3. The study used
keras-cv's Stable Diffusion v1.4, which keras-hub does not provide; SD3 medium is keras-hub's
Stable Diffusion, so the Keras 3 column measures a different (larger) model than the Keras 2 one.

predict: text-to-image generate on prompt token ids (preprocessor=None: the CLIP tokenizer needs
TensorFlow, and nothing is downloaded), num_steps denoising steps per call with classifier-free
guidance; a sample is time per denoising step (call time / num_steps).
fit: keras-hub raises NotImplementedError for SD3, so this module defines the training step: the
MMDiT diffusion model predicts the noise ε of noised latents x_t = (1 - σ) x0 + σ ε (rectified
flow, random σ), MSE loss, AdamW, through train_on_batch. Text embeddings and latents are random
tensors of the real shapes: the frozen CLIP encoders and VAE are not part of the step, as in SD
training with precomputed embeddings and latents.
"""

from __future__ import annotations

import numpy as np

from .. import kerashub_models as hub


def build(spec, fw):
    import keras_hub

    keras, batch, options = fw.keras, spec.batch_size, spec.options
    preset = hub.local_preset(options)
    if preset:
        backbone = keras_hub.models.StableDiffusion3Backbone.from_preset(preset)
    else:
        backbone = hub.keras_hub_backbone(keras_hub, "stable_diffusion", spec.size)
    latent_shape = tuple(int(d) for d in backbone.latent_shape[1:])
    facts = dict(batch_size=batch, image_size=int(backbone.image_shape[0]),
                 latent_shape=list(latent_shape), params=backbone.count_params(),
                 preset=preset or f"random weights, {spec.size} config")

    if spec.task == "fit":
        diffuser = backbone.diffuser
        trainer = keras.Model(diffuser.input, diffuser.output, name="sd3_diffusion_trainer")
        context_length = 2 * int(backbone.clip_l.max_sequence_length)  # CLIP tokens, padded (no T5)
        pooled = int(backbone.clip_l.hidden_dim + backbone.clip_g.hidden_dim)
        latents, timesteps, noise = hub.noised_latents(spec.seed, batch, latent_shape)
        r = hub.rng(spec.seed + 3)
        x = {"latent": latents, "timestep": timesteps,
             "context": r.standard_normal((batch, context_length, backbone.t5_hidden_dim),
                                          dtype=np.float32),
             "pooled_projection": r.standard_normal((batch, pooled), dtype=np.float32)}
        trainer.compile(optimizer=keras.optimizers.AdamW(1e-4),
                        loss=keras.losses.MeanSquaredError(), jit_compile=fw.jit_compile())
        facts.update(training_step=hub.SD_FIT_DOC, trained_params=trainer.count_params())
        return hub.fit_bench(trainer, x, noise, batch=batch,
                             effective={"jit_compile": hub.jit_in_effect(trainer)}, extra=facts)

    num_steps = int(options["num_steps"])
    guidance = float(options.get("guidance_scale", 7.0))
    model = keras_hub.models.StableDiffusion3TextToImage(backbone=backbone, preprocessor=None)
    model.compile(jit_compile=fw.jit_compile())
    length = int(backbone.clip_l.max_sequence_length)
    vocab = int(backbone.clip_l.vocabulary_size)
    prompts = {name: hub.token_batch(spec.seed, batch, length, vocab) for name in ("clip_l", "clip_g")}
    negative = {name: np.zeros((batch, length), np.int32) for name in ("clip_l", "clip_g")}
    # num_steps stays fixed for the whole process: on TensorFlow a changed num_steps would need
    # model.generate_function reset to None before the next call.
    facts.update(num_steps=num_steps, guidance_scale=guidance, prompt_length=length)

    def step():
        images = model.generate({"prompts": dict(prompts), "negative_prompts": dict(negative)},
                                num_steps=num_steps, guidance_scale=guidance, seed=spec.seed)
        facts["images_shape"] = list(np.shape(images))
        return images

    return hub.Bench(step=step, items_per_step=batch, steps_per_call=num_steps, returns_to_host=True,
                     timing=hub.SD_PREDICT_TIMING,
                     effective={"jit_compile": hub.jit_in_effect(model)}, extra=facts)
