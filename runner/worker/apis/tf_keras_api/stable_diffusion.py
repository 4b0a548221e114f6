"""keras-cv 0.8 Stable Diffusion v1.4 on Keras 2 (the model the study measured; keras-hub's
StableDiffusion3 in the Keras 3 column is a different, larger model). keras-cv builds one fixed
architecture (860 M-parameter UNet, CLIP ViT-L text encoder, VAE decoder) with random weights
(download_weights=False); only the image side varies (options.image_size, a multiple of 128:
512 as in the study, 128 for tiny, where the catalog marks the cells not applicable because the
weights alone take ~4 GB).

predict: text encoder on prompt token ids, then keras-cv's generate_image (num_steps denoising
steps with classifier-free guidance 7.5, VAE decode); a sample is the call time / num_steps, i.e.
time per denoising step as in the study.
fit: keras-cv has no training step, so this module defines one: the UNet predicts the noise ε of
noised latents x_t = sqrt(ᾱ_t) x0 + sqrt(1 - ᾱ_t) ε at random timesteps (the DDPM objective SD
v1 was trained with), MSE, AdamW, through train_on_batch; text embeddings and latents are random
tensors of the real shapes (frozen encoders are not part of the step).
"""

from __future__ import annotations

import math

import numpy as np

from .. import kerashub_models as hub

TEXT_LENGTH = 77  # keras-cv's MAX_PROMPT_LENGTH


def timestep_embedding(timesteps: np.ndarray, dim: int = 320, max_period: float = 10000.0) -> np.ndarray:
    """keras-cv's sinusoidal timestep embedding, one row per sample."""
    half = dim // 2
    freqs = np.exp(-math.log(max_period) * np.arange(half, dtype=np.float32) / half)
    args = timesteps.astype(np.float32)[:, None] * freqs[None, :]
    return np.concatenate([np.cos(args), np.sin(args)], axis=1).astype(np.float32)


def build(spec, fw):
    hub.import_keras2("keras_cv")
    from keras_cv.src.models.stable_diffusion.decoder import Decoder
    from keras_cv.src.models.stable_diffusion.diffusion_model import DiffusionModel
    from keras_cv.src.models.stable_diffusion.stable_diffusion import StableDiffusionBase
    from keras_cv.src.models.stable_diffusion.text_encoder import TextEncoder

    keras, batch, options = fw.keras, spec.batch_size, spec.options
    if options.get("preset"):
        raise ValueError("keras-cv 0.8's Stable Diffusion has no presets to load from a folder")
    side = int(options.get("image_size") or {"full": 512, "small": 256, "tiny": 128}[spec.size])
    if side % 128:
        raise ValueError(f"image_size {side}: keras-cv's UNet needs a multiple of 128")
    unet = DiffusionModel(side, side, TEXT_LENGTH, download_weights=False)
    facts = dict(batch_size=batch, image_size=side, latent_shape=[side // 8, side // 8, 4],
                 model="keras-cv Stable Diffusion v1.4 (random weights)")
    r = hub.rng(spec.seed)

    if spec.task == "fit":
        x0 = r.standard_normal((batch, side // 8, side // 8, 4), dtype=np.float32)
        noise = r.standard_normal(x0.shape, dtype=np.float32)
        t = r.integers(0, 1000, size=(batch,))
        # SD v1's scaled-linear schedule: betas from 0.00085 to 0.012 over 1000 steps.
        alphas_cumprod = np.cumprod(1.0 - np.linspace(0.00085**0.5, 0.012**0.5, 1000) ** 2)
        a = alphas_cumprod[t].astype(np.float32).reshape(batch, 1, 1, 1)
        x = {"latent": np.sqrt(a) * x0 + np.sqrt(1.0 - a) * noise,
             "timestep_embedding": timestep_embedding(t),
             "context": r.standard_normal((batch, TEXT_LENGTH, 768), dtype=np.float32)}
        unet.compile(optimizer=keras.optimizers.AdamW(1e-4), loss=keras.losses.MeanSquaredError(),
                     jit_compile=fw.jit_compile())
        facts.update(training_step=hub.SD_FIT_DOC.replace(
            "x_t = (1 - σ) x0 + σ ε at random σ", "x_t = sqrt(ᾱ) x0 + sqrt(1 - ᾱ) ε at random t"),
            params=unet.count_params())
        return hub.fit_bench(unet, x, noise, batch=batch,
                             effective={"jit_compile": hub.jit_in_effect(unet)}, extra=facts)

    num_steps = int(options["num_steps"])
    class RandomStableDiffusion(StableDiffusionBase):
        # The base class leaves these two abstract; keras-cv's StableDiffusion would build them
        # with downloaded weights.
        text_encoder = property(lambda self: self._text_encoder)
        diffusion_model = property(lambda self: self._diffusion_model)

    sd = RandomStableDiffusion(side, side, jit_compile=bool(fw.jit_compile()))
    sd._text_encoder = TextEncoder(TEXT_LENGTH, download_weights=False)
    sd._diffusion_model = unet
    sd._decoder = Decoder(side, side, download_weights=False)
    for part in (sd._text_encoder, sd._diffusion_model, sd._decoder):
        part.compile(jit_compile=fw.jit_compile())
    tokens = hub.token_batch(spec.seed, batch, TEXT_LENGTH, 49408)
    positions = np.repeat(np.arange(TEXT_LENGTH, dtype=np.int32)[None], batch, axis=0)
    facts.update(num_steps=num_steps, guidance_scale=7.5, prompt_length=TEXT_LENGTH,
                 params=sum(p.count_params() for p in (sd._text_encoder, unet, sd._decoder)))

    def step():
        # text_to_image without the tokenizer (its vocabulary is a download): encode, generate.
        encoded = sd.text_encoder.predict_on_batch([tokens, positions])
        images = sd.generate_image(encoded, batch_size=batch, num_steps=num_steps, seed=spec.seed)
        facts["images_shape"] = list(np.shape(images))
        return images

    return hub.Bench(step=step, items_per_step=batch, steps_per_call=num_steps, returns_to_host=True,
                     timing=hub.SD_PREDICT_TIMING, effective={"jit_compile": fw.jit_compile()},
                     extra=facts)
