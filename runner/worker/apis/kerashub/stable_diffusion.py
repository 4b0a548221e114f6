"""What the two Stable Diffusion workloads share: keras-hub's StableDiffusion3 (Keras 3,
keras_api/stable_diffusion.py) and keras-cv's Stable Diffusion v1.4 (Keras 2,
tf_keras_api/stable_diffusion.py) are different models, built each in its module; their steps
are the same and written here.

predict: one text-to-image generate call of num_steps denoising steps per timed call; a sample is
the call time / num_steps, i.e. time per denoising step as in the study.
fit: the study's training step: the VAE image encoder alone regresses fixed random targets of its
output shape, MSE, Adam (keras-hub and keras-cv have no fit for Stable Diffusion).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import numpy as np

from ...bench import Bench
from .. import answers
from .benches import encoder_fit_bench

SD_PREDICT_TIMING = ("one text-to-image generate call of num_steps denoising steps (text encoders, "
                     "the denoising loop with classifier-free guidance, VAE decode; images copied "
                     "to the host) per timed call; a sample is the call time / num_steps, i.e. "
                     "time per denoising step as in the study; items are images (batch_size per "
                     "call, so batch_size / num_steps per step)")
SD_FIT_DOC = ("the Keras 3 benchmark study's Stable Diffusion training step: the VAE image "
              "encoder (up to its latent moments, before sampling) regresses fixed random "
              "targets of its output shape from images of image_size, MSE, Adam, one batch per "
              "train_on_batch (keras-hub and keras-cv have no fit for Stable Diffusion)")


def images_per_step(batch: int, num_steps: int) -> float:
    """A Stable Diffusion step is one denoising step: a call of num_steps of them makes `batch`
    images, so items/s is images/s and energy per item is energy per image."""
    return batch / num_steps


def fit_bench(spec, fw, encoder, side: int, facts: dict[str, Any]) -> Bench:
    return encoder_fit_bench(fw.keras, encoder, side, spec.batch_size, spec.seed, facts,
                             fw.jit_compile(), SD_FIT_DOC)


def predict_bench(generate: Callable[[], Any], *, batch: int, num_steps: int,
                  effective: dict[str, Any], facts: dict[str, Any]) -> Bench:
    """`generate()`: one text-to-image call of num_steps denoising steps, its images on the
    host. Its answer: the images' norms."""

    def step():
        images = generate()
        facts["images_shape"] = list(np.shape(images))
        return images

    return Bench(step=step, items_per_step=images_per_step(batch, num_steps),
                 steps_per_call=num_steps, returns_to_host=True, timing=SD_PREDICT_TIMING,
                 effective=effective, extra=facts, answer=lambda: answers.output(step()))
