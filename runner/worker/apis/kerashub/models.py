"""Building the keras-hub models: from a local preset folder (never a download), or with random
weights from the configurations (configs.py); Keras 2's libraries (keras-nlp, keras-cv 0.8) with
a clear error outside the environment that has them."""

from __future__ import annotations

import importlib
import os
from typing import Any

from .configs import BERT, GEMMA, MISTRAL, SAM, SD3, check_sd3_side, config


def local_preset(options: dict[str, Any]) -> str | None:
    """The preset folder named by `options.preset`, or None. Only existing local folders are
    accepted: a keras-hub/Kaggle handle would download weights at run time, which this runner never
    does (mount the folder into the container and give its path instead)."""
    preset = options.get("preset")
    if not preset:
        return None
    path = os.path.expanduser(str(preset))
    if not os.path.isdir(path):
        raise ValueError(
            f"options.preset = {preset!r} is not an existing local folder; this runner never "
            "downloads presets: download the preset yourself and give its folder path")
    return path


def import_keras2(name: str):
    """keras_nlp / keras_cv for the Keras 2 column, with a clear error outside the environment
    that carries them (images/keras2-tf215; the current tf-keras image has neither)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise RuntimeError(
            f"{name} is not installed here: the Keras 2 keras-hub cells run in the keras2-tf215 "
            f"image (TensorFlow 2.15, keras-nlp/keras-cv 0.8) ({exc})") from exc


def keras_hub_backbone(keras_hub, workload: str, size: str, image_size: int | None = None):
    """The random-weight keras-hub backbone of `workload` at `size` (the tests build the full
    ones under jax.eval_shape to count parameters without allocating them); Stable Diffusion
    at `image_size` when given (parameter counts do not depend on it)."""
    models = keras_hub.models
    if workload == "bert":
        return models.BertBackbone(**config(BERT, size))
    if workload == "gemma":
        return models.GemmaBackbone(**config(GEMMA, size))
    if workload == "mistral":
        return models.MistralBackbone(**config(MISTRAL, size))
    if workload == "sam":
        cfg = config(SAM, size)
        side = cfg["image_size"]
        embedding = side // cfg["encoder"]["patch_size"]
        return models.SAMBackbone(
            image_encoder=models.ViTDetBackbone(image_shape=(side, side, 3), **cfg["encoder"]),
            prompt_encoder=keras_hub.layers.SAMPromptEncoder(
                image_embedding_size=(embedding, embedding), input_image_size=(side, side),
                **cfg["prompt"]),
            mask_decoder=keras_hub.layers.SAMMaskDecoder(**cfg["decoder"]))
    if workload == "stable_diffusion":
        from keras_hub.src.models.vae.vae_backbone import VAEBackbone  # not exported in 0.32

        cfg = config(SD3, size)
        side = image_size or cfg["image_size"]
        check_sd3_side(side, cfg)
        return models.StableDiffusion3Backbone(
            **cfg["mmdit"], vae=VAEBackbone(**cfg["vae"]),
            clip_l=models.CLIPTextEncoder(**cfg["clip_l"], name="clip_l"),
            clip_g=models.CLIPTextEncoder(**cfg["clip_g"], name="clip_g"),
            image_shape=(side, side, 3))
    raise KeyError(workload)
