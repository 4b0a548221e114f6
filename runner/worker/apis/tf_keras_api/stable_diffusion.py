"""keras-cv 0.8 Stable Diffusion v1.4 on Keras 2 (the model the study measured; keras-hub's
StableDiffusion3 in the Keras 3 column is a different, larger model). keras-cv builds one fixed
architecture (860 M-parameter UNet, CLIP ViT-L text encoder, VAE) with random weights
(download_weights=False); only the image side varies (options.image_size, a multiple of 128:
512 as in the study; the catalog marks the tiny cells not applicable because the UNet's weights
alone take ~4 GB).

predict: text encoder on prompt token ids, then keras-cv's generate_image (num_steps denoising
steps with classifier-free guidance 7.5, VAE decode); a sample is the call time / num_steps, i.e.
time per denoising step as in the study.
fit: the study's training step: keras-cv's VAE image encoder up to its latent moments (its
third-last layer, 8 channels at 1/8 of the image side) regresses fixed random targets, MSE, Adam.
"""

from __future__ import annotations

import numpy as np

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub import stable_diffusion as recipe
from ..kerashub.inputs import token_batch
from ..kerashub.models import import_keras2
from . import Framework

TEXT_LENGTH = 77  # keras-cv's MAX_PROMPT_LENGTH


def build(spec: CellSpec, fw: Framework) -> Bench:
    import_keras2("keras_cv")
    batch, options = spec.batch_size, spec.options
    if options.get("preset"):
        raise ValueError("keras-cv 0.8's Stable Diffusion has no presets to load from a folder")
    side = int(options["image_size"])
    if side % 128:
        raise ValueError(f"options.image_size = {side}: keras-cv's Stable Diffusion needs a "
                         "multiple of 128")
    facts = dict(batch_size=batch, image_size=side, latent_shape=[side // 8, side // 8, 4],
                 model="keras-cv Stable Diffusion v1.4 (random weights)")
    if spec.task == "fit":
        from keras_cv.src.models.stable_diffusion.image_encoder import ImageEncoder

        encoder = ImageEncoder(download_weights=False)
        moments = fw.keras.Model(encoder.inputs, encoder.layers[-3].output)   # as the study did
        return recipe.fit_bench(spec, fw, moments, side, facts)
    return predict(spec, fw, side, facts)


def predict(spec: CellSpec, fw: Framework, side: int, facts: dict):
    from keras_cv.src.models.stable_diffusion.decoder import Decoder
    from keras_cv.src.models.stable_diffusion.diffusion_model import DiffusionModel
    from keras_cv.src.models.stable_diffusion.stable_diffusion import StableDiffusionBase
    from keras_cv.src.models.stable_diffusion.text_encoder import TextEncoder

    batch, num_steps = spec.batch_size, int(spec.options["num_steps"])
    unet = DiffusionModel(side, side, TEXT_LENGTH, download_weights=False)

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
    tokens = token_batch(spec.seed, batch, TEXT_LENGTH, 49408)
    positions = np.repeat(np.arange(TEXT_LENGTH, dtype=np.int32)[None], batch, axis=0)
    facts.update(num_steps=num_steps, guidance_scale=7.5, prompt_length=TEXT_LENGTH,
                 params=sum(p.count_params() for p in (sd._text_encoder, unet, sd._decoder)))

    def generate_with(steps: int):
        def generate():
            # text_to_image without the tokenizer (its vocabulary is a download): encode, generate.
            encoded = sd.text_encoder.predict_on_batch([tokens, positions])
            return sd.generate_image(encoded, batch_size=batch, num_steps=steps, seed=spec.seed)
        return generate

    return recipe.predict_bench(generate_with, batch=batch, num_steps=num_steps, facts=facts,
                                effective={"jit_compile": fw.jit_compile(), "image_size": side})
