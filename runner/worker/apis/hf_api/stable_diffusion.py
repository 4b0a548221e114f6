"""Stable Diffusion 3 on Hugging Face's code: diffusers' SD3Transformer2DModel, AutoencoderKL and
FlowMatchEulerDiscreteScheduler in a StableDiffusion3Pipeline, with transformers' two CLIP text
encoders (CLIPTextModelWithProjection), all from the keras-hub cell's configuration
(stable_diffusion_3_medium at full size; no T5, as keras-hub's). The VAE has its shift factor
(0.0609) and scaling factor (1.5305) set, without which SD3's latents decode wrong. At tiny and
small size diffusers' VAE decoder has one block more per level than keras-hub's (diffusers ties it
to the encoder's layers_per_block + 1); the full-size VAE is the same.

predict: one text-to-image call per timed call, as the Keras cell: both CLIP encoders on the
keras-hub cell's prompt token ids (and on zeros for the negative prompt: no tokenizer, nothing
downloaded), then the pipeline's denoising loop (num_steps steps, classifier-free guidance) and VAE
decode, images to the host. The context is keras-hub's: CLIP-L and CLIP-G hidden states side by
side, padded to 4096 features, then as many zero tokens as CLIP's length (the place of T5's): 154
tokens at full size, where diffusers' own default (T5's 256) would make 333. jit = true compiles
the transformer (diffusers' recipe). A sample is the call time / num_steps, as on Keras.
fit: the study's step, as the Keras cell: the VAE encoder alone (up to its latent moments)
regresses fixed random targets of its output shape, MSE, Adam.

No answer is compared: the initial latents come from each framework's generator (matrix.toml sets
check_answers = false on this row) and no weight map is written for diffusers' SD3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...bench import Bench
from ...protocol import CellSpec
from ..huggingface import benches
from ..kerashub import stable_diffusion as recipe
from ..kerashub.configs import SD3, check_sd3_side, config
from ..kerashub.inputs import token_batch
from . import Framework

ANSWER_NOTE = ("diffusers' SD3 names and lays out its weights differently from keras-hub's and "
               "no weight map is written: its random weights are not the Keras cells', so its "
               "answer is not compared")
CONTEXT_FEATURES = 4096          # keras-hub's (and diffusers') joint attention width without T5


def transformer(cfg: dict, side: int):
    from diffusers import SD3Transformer2DModel

    m, clip_width = cfg["mmdit"], cfg["clip_l"]["hidden_dim"] + cfg["clip_g"]["hidden_dim"]
    return SD3Transformer2DModel(
        sample_size=side // 8, patch_size=m["mmdit_patch_size"], in_channels=16, out_channels=16,
        num_layers=m["mmdit_num_layers"], num_attention_heads=m["mmdit_num_heads"],
        attention_head_dim=m["mmdit_hidden_dim"] // m["mmdit_num_heads"],
        joint_attention_dim=CONTEXT_FEATURES, caption_projection_dim=m["mmdit_hidden_dim"],
        pooled_projection_dim=clip_width, pos_embed_max_size=m["mmdit_position_size"],
        qk_norm=m["mmdit_qk_norm"], dual_attention_layers=())


def vae(cfg: dict, side: int):
    from diffusers import AutoencoderKL

    v = cfg["vae"]
    return AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=list(v["encoder_num_filters"]),
        layers_per_block=v["encoder_num_blocks"][0], latent_channels=v["sample_channels"] // 2,
        norm_num_groups=32, scaling_factor=v["scale"], shift_factor=v["shift"],
        use_quant_conv=False, use_post_quant_conv=False, sample_size=side)


def clip(c: dict):
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    # eos_token_id 2: transformers pools at the highest token id, as keras-hub's CLIP does.
    return CLIPTextModelWithProjection(CLIPTextConfig(
        vocab_size=c["vocabulary_size"], hidden_size=c["hidden_dim"],
        intermediate_size=c["intermediate_dim"], num_hidden_layers=c["num_layers"],
        num_attention_heads=c["num_heads"], max_position_embeddings=c["max_sequence_length"],
        hidden_act=c["intermediate_activation"], projection_dim=c["embedding_dim"],
        bos_token_id=0, pad_token_id=1, eos_token_id=2))


def pipeline(cfg: dict, side: int):
    from diffusers import FlowMatchEulerDiscreteScheduler, StableDiffusion3Pipeline

    pipe = StableDiffusion3Pipeline(
        transformer=transformer(cfg, side), vae=vae(cfg, side),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        text_encoder=clip(cfg["clip_l"]), tokenizer=None, text_encoder_2=clip(cfg["clip_g"]),
        tokenizer_2=None, text_encoder_3=None, tokenizer_3=None)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def encode(pipe, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """keras-hub's encode_text_step with transformers' CLIP encoders: (context, pooled)."""
    clip_l = pipe.text_encoder(ids, output_hidden_states=True)
    clip_g = pipe.text_encoder_2(ids, output_hidden_states=True)
    pooled = torch.cat([clip_l.text_embeds, clip_g.text_embeds], dim=-1)
    context = torch.cat([clip_l.hidden_states[-2], clip_g.hidden_states[-2]], dim=-1)
    context = torch.nn.functional.pad(context, (0, CONTEXT_FEATURES - context.shape[-1]))
    return torch.nn.functional.pad(context, (0, 0, 0, ids.shape[1])), pooled


def build(spec: CellSpec, fw: Framework) -> Bench:
    benches.no_preset(spec)
    cfg, batch, options = config(SD3, spec.size), spec.batch_size, spec.options
    side = int(options["image_size"])
    check_sd3_side(side, cfg)
    pipe = pipeline(cfg, side)
    parts = {"transformer": pipe.transformer, "vae": pipe.vae, "clip_l": pipe.text_encoder,
             "clip_g": pipe.text_encoder_2}
    facts: dict[str, Any] = dict(
        batch_size=batch, image_size=side, latent_shape=[side // 8, side // 8, 16],
        params=sum(p.numel() for part in parts.values() for p in part.parameters()),
        preset=f"random weights, {spec.size} config", answer_note=ANSWER_NOTE)
    precision = benches.Precision(fw, spec.precision)
    pipe.to(fw.torch_device, precision.param_dtype)
    if spec.task == "fit":
        pipe.vae.train()
        return benches.encoder_fit_bench(fw, precision, pipe.vae.encoder, side=side, batch=batch,
                                         seed=spec.seed, facts=facts, doc=recipe.SD_FIT_DOC)
    return predict(spec, fw, pipe, precision, cfg, facts)


def predict(spec: CellSpec, fw: Framework, pipe, precision, cfg: dict, facts: dict[str, Any]):
    batch, side = spec.batch_size, int(spec.options["image_size"])
    num_steps = int(spec.options["num_steps"])
    guidance = float(spec.options.get("guidance_scale", 7.0))
    length, vocab = cfg["clip_l"]["max_sequence_length"], cfg["clip_l"]["vocabulary_size"]
    ids = torch.from_numpy(token_batch(spec.seed, batch, length, vocab)).to(fw.torch_device,
                                                                           torch.int64)
    pipe.transformer = fw.compile(pipe.transformer)

    def generate_with(steps: int) -> Callable[[], np.ndarray]:
        """One text-to-image call of `steps` denoising steps (the study's timing runs 2 and
        num_steps + 2 after the window)."""
        def generate() -> np.ndarray:
            with torch.inference_mode(), precision.autocast():
                context, pooled = encode(pipe, ids)
                negative, negative_pooled = encode(pipe, torch.zeros_like(ids))
                out = pipe(prompt_embeds=context, pooled_prompt_embeds=pooled,
                           negative_prompt_embeds=negative,
                           negative_pooled_prompt_embeds=negative_pooled,
                           num_inference_steps=steps, guidance_scale=guidance, height=side,
                           width=side, output_type="np",
                           generator=torch.Generator(fw.torch_device).manual_seed(spec.seed))
            return out.images
        return generate

    facts.update(num_steps=num_steps, guidance_scale=guidance, prompt_length=length,
                 context_tokens=2 * length)
    bench = recipe.predict_bench(generate_with, batch=batch, num_steps=num_steps, facts=facts,
                                 effective={**precision.effective, "image_size": side,
                                            "jit_compile": benches.compiled(fw)})
    bench.answer = None
    return bench
