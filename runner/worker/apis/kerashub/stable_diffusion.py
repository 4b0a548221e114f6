"""What the two Stable Diffusion workloads share: keras-hub's StableDiffusion3 (Keras 3,
keras_api/stable_diffusion.py) and keras-cv's Stable Diffusion v1.4 (Keras 2,
tf_keras_api/stable_diffusion.py) are different models, built each in its module; their steps
are the same and written here.

predict: one text-to-image generate call of num_steps denoising steps per timed call; a sample is
the call time / num_steps, i.e. time per denoising step. After the timed window, the step is also
timed as the study timed it (keras-benchmarks, benchmark/stable_diffusion/*/predict.py):
(T(N+2 steps) − T(2 steps)) / N, which leaves out the text encoders and the VAE decode (the call
time / N spreads them over the steps); extra.study_step_ms, one figure per round.
fit: the study's training step: the VAE image encoder alone regresses fixed random targets of its
output shape, MSE, Adam (keras-hub and keras-cv have no fit for Stable Diffusion).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import statistics
import time

import numpy as np

from ...protocol import CellSpec
from .. import KerasFramework
from ...bench import Bench
from .. import answers
from .benches import encoder_fit_bench

SD_PREDICT_TIMING = ("one text-to-image generate call of num_steps denoising steps (text encoders, "
                     "the denoising loop with classifier-free guidance, VAE decode; images copied "
                     "to the host) per timed call; a sample is the call time / num_steps (the "
                     "encoders and the decode spread over the steps; the study's own (T(N+2) − "
                     "T(2)) / N is extra.study_step_ms); items are images (batch_size per call, "
                     "so batch_size / num_steps per step)")
SD_FIT_DOC = ("the Keras 3 benchmark study's Stable Diffusion training step: the VAE image "
              "encoder (up to its latent moments, before sampling) regresses fixed random "
              "targets of its output shape from images of image_size, MSE, Adam, one batch per "
              "train_on_batch (keras-hub and keras-cv have no fit for Stable Diffusion)")


STUDY_ROUNDS = 3
STUDY_METHOD = ("(T(N+2 steps) − T(2 steps)) / N as the study timed it: two generate calls with "
                "2 and N+2 denoising steps (each built and run once untimed first), their "
                "difference per step, which leaves out the text encoders and the VAE decode; one "
                "figure per round, after the timed window")


def study_timing(generate_with: Callable[[int], Callable[[], Any]], num_steps: int,
                 rounds: int = STUDY_ROUNDS) -> dict[str, Any]:
    """The study's time per denoising step, `rounds` times: (T(N+2) − T(2)) / N in ms."""
    short, long = generate_with(2), generate_with(num_steps + 2)
    short()
    long()
    per_step = []
    for _ in range(rounds):
        started = time.perf_counter()
        short()
        middle = time.perf_counter()
        long()
        ended = time.perf_counter()
        per_step.append(((ended - middle) - (middle - started)) / num_steps * 1000.0)
    return {"study_step_ms": per_step, "study_step_method": STUDY_METHOD,
            "study_step_median_ms": statistics.median(per_step)}


def images_per_step(batch: int, num_steps: int) -> float:
    """A Stable Diffusion step is one denoising step: a call of num_steps of them makes `batch`
    images, so items/s is images/s and energy per item is energy per image."""
    return batch / num_steps


def fit_bench(spec: CellSpec, fw: KerasFramework, encoder: Any, side: int,
              facts: dict[str, Any]) -> Bench:
    return encoder_fit_bench(fw.keras, encoder, side, spec.batch_size, spec.seed, facts,
                             fw.jit_compile(), SD_FIT_DOC)


def predict_bench(generate_with: Callable[[int], Callable[[], Any]], *, batch: int,
                  num_steps: int, effective: dict[str, Any], facts: dict[str, Any]) -> Bench:
    """`generate_with(steps)()`: one text-to-image call of `steps` denoising steps, its images on
    the host (a model may compile one function per step count). Timed: num_steps per call; after
    the window, the study's own timing (study_timing). Its answer: the images' norms."""
    generate = generate_with(num_steps)

    def step():
        images = generate()
        facts["images_shape"] = list(np.shape(images))
        return images

    return Bench(step=step, items_per_step=images_per_step(batch, num_steps),
                 steps_per_call=num_steps, returns_to_host=True, timing=SD_PREDICT_TIMING,
                 effective=effective, extra=facts, answer=lambda: answers.output(step()),
                 evaluate=lambda: study_timing(generate_with, num_steps))
