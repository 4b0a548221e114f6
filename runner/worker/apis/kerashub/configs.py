"""The keras-hub models' configurations by size: constructor arguments of the keras-hub classes
(Keras 2: keras-nlp / keras-cv take the same numbers). "full" ones are identical to keras-hub's
presets bert_base_en_uncased, sam_huge_sa1b, gemma_7b_en and mistral_7b_en (the Keras 3 benchmark
study's models; its BERT was the cased bert_base_en, see BERT below) and keras-hub's
stable_diffusion_3_medium in place of keras-cv's Stable Diffusion v1.4, with random weights; "tiny" ones keep each architecture and shrink every dimension so that the smoke profile
and CI run on a CPU; "small" sits between the two so that a laptop GPU can run something
meaningful. Standard library only."""

from __future__ import annotations

import copy
from typing import Any

BERT = {
    # bert_base_en_uncased: 109,482,240 backbone parameters, a 30 522-token vocabulary. (The
    # study's code loaded "bert_base_en", the cased model: 108,310,272 parameters, 28 996
    # tokens; the same encoder, a smaller embedding table.)
    "full": dict(vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
                 intermediate_dim=3072, max_sequence_length=512),
    "small": dict(vocabulary_size=30522, num_layers=4, num_heads=4, hidden_dim=256,
                  intermediate_dim=1024, max_sequence_length=512),
    "tiny": dict(vocabulary_size=128, num_layers=2, num_heads=2, hidden_dim=16,
                 intermediate_dim=32, max_sequence_length=64),
}

GEMMA = {
    # gemma_7b_en: 8,537,680,896 parameters.
    "full": dict(vocabulary_size=256000, num_layers=28, num_query_heads=16, num_key_value_heads=16,
                 hidden_dim=3072, intermediate_dim=49152, head_dim=256),
    "small": dict(vocabulary_size=32000, num_layers=4, num_query_heads=4, num_key_value_heads=4,
                  hidden_dim=512, intermediate_dim=4096, head_dim=128),
    "tiny": dict(vocabulary_size=256, num_layers=2, num_query_heads=2, num_key_value_heads=1,
                 hidden_dim=16, intermediate_dim=32, head_dim=8),
}

MISTRAL = {
    # mistral_7b_en: 7,241,732,096 parameters.
    "full": dict(vocabulary_size=32000, num_layers=32, num_query_heads=32, num_key_value_heads=8,
                 hidden_dim=4096, intermediate_dim=14336, rope_max_wavelength=10000,
                 layer_norm_epsilon=1e-6, sliding_window=4096),
    "small": dict(vocabulary_size=32000, num_layers=4, num_query_heads=8, num_key_value_heads=2,
                  hidden_dim=512, intermediate_dim=1792, sliding_window=4096),
    "tiny": dict(vocabulary_size=256, num_layers=2, num_query_heads=2, num_key_value_heads=1,
                 hidden_dim=16, intermediate_dim=32, sliding_window=64),
}

SAM = {
    # sam_huge_sa1b (ViT-H image encoder): 641,090,864 parameters. (keras-hub 0.32's preset table
    # swaps the huge and large counts; ViT-H is the 641 M one.)
    "full": dict(
        image_size=1024,
        encoder=dict(hidden_size=1280, num_layers=32, intermediate_dim=5120, num_heads=16,
                     global_attention_layer_indices=[7, 15, 23, 31], patch_size=16,
                     num_output_channels=256, window_size=14),
        prompt=dict(hidden_size=256, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=256, intermediate_dim=2048, num_heads=8,
                     embedding_dim=256, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=256),
    ),
    "small": dict(
        image_size=512,
        encoder=dict(hidden_size=256, num_layers=4, intermediate_dim=1024, num_heads=4,
                     global_attention_layer_indices=[1, 3], patch_size=16,
                     num_output_channels=64, window_size=8),
        prompt=dict(hidden_size=64, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=64, intermediate_dim=256, num_heads=4,
                     embedding_dim=64, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=64),
    ),
    "tiny": dict(
        image_size=64,
        encoder=dict(hidden_size=16, num_layers=2, intermediate_dim=32, num_heads=2,
                     global_attention_layer_indices=[1], patch_size=16,
                     num_output_channels=8, window_size=2),
        prompt=dict(hidden_size=8, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=8, intermediate_dim=16, num_heads=2,
                     embedding_dim=8, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=8),
    ),
}

SD3 = {
    # stable_diffusion_3_medium: 2,987,080,931 parameters (CLIP-L + CLIP-G + MMDiT + VAE; no T5).
    "full": dict(
        image_size=1024,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=1536, mmdit_num_layers=24,
                   mmdit_num_heads=24, mmdit_position_size=192, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=49408, embedding_dim=768, hidden_dim=768, num_layers=12,
                    num_heads=12, intermediate_dim=3072, intermediate_activation="quick_gelu",
                    intermediate_output_index=10, max_sequence_length=77),
        clip_g=dict(vocabulary_size=49408, embedding_dim=1280, hidden_dim=1280, num_layers=32,
                    num_heads=20, intermediate_dim=5120, intermediate_activation="gelu",
                    intermediate_output_index=30, max_sequence_length=77),
        vae=dict(encoder_num_filters=[128, 256, 512, 512], encoder_num_blocks=[2, 2, 2, 2],
                 decoder_num_filters=[512, 512, 256, 128], decoder_num_blocks=[3, 3, 3, 3],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
    "small": dict(
        image_size=256,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=256, mmdit_num_layers=4,
                   mmdit_num_heads=4, mmdit_position_size=64, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=49408, embedding_dim=128, hidden_dim=128, num_layers=2,
                    num_heads=2, intermediate_dim=256, intermediate_activation="quick_gelu",
                    intermediate_output_index=0, max_sequence_length=77),
        clip_g=dict(vocabulary_size=49408, embedding_dim=256, hidden_dim=256, num_layers=2,
                    num_heads=4, intermediate_dim=512, intermediate_activation="gelu",
                    intermediate_output_index=0, max_sequence_length=77),
        vae=dict(encoder_num_filters=[32, 64, 64, 64], encoder_num_blocks=[1, 1, 1, 1],
                 decoder_num_filters=[64, 64, 64, 32], decoder_num_blocks=[1, 1, 1, 1],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
    "tiny": dict(
        image_size=64,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=16, mmdit_num_layers=2,
                   mmdit_num_heads=2, mmdit_position_size=8, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=64, embedding_dim=8, hidden_dim=8, num_layers=2,
                    num_heads=2, intermediate_dim=16, intermediate_activation="quick_gelu",
                    intermediate_output_index=0, max_sequence_length=8),
        clip_g=dict(vocabulary_size=64, embedding_dim=8, hidden_dim=8, num_layers=2,
                    num_heads=2, intermediate_dim=16, intermediate_activation="gelu",
                    intermediate_output_index=0, max_sequence_length=8),
        # GroupNormalization inside the VAE uses 32 groups: filters stay multiples of 32.
        vae=dict(encoder_num_filters=[32, 32, 32, 32], encoder_num_blocks=[1, 1, 1, 1],
                 decoder_num_filters=[32, 32, 32, 32], decoder_num_blocks=[1, 1, 1, 1],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
}

# Parameter counts of the presets the full configurations mirror (from keras-hub's preset tables
# and the published models); the tests check the full configurations against them.
PRESET_PARAMS = {
    "bert": ("bert_base_en_uncased", 109_482_240),
    "sam": ("sam_huge_sa1b", 641_090_864),
    "stable_diffusion": ("stable_diffusion_3_medium", 2_987_080_931),
    "gemma": ("gemma_7b_en", 8_537_680_896),
    "mistral": ("mistral_7b_en", 7_241_732_096),
}


def config(table: dict[str, Any], size: str) -> dict[str, Any]:
    """A deep copy of one size's configuration (callers may modify it)."""
    return copy.deepcopy(table[size])


def check_sd3_side(side: int, cfg: dict[str, Any]) -> None:
    """An image side SD3 can take: the VAE halves it three times and the MMDiT takes 2×2 patches
    of the latent, up to its position table."""
    patches = side // 16
    if side % 16 or patches > cfg["mmdit"]["mmdit_position_size"]:
        raise ValueError(f"options.image_size = {side}: StableDiffusion3 needs a multiple of 16 "
                         f"up to {16 * cfg['mmdit']['mmdit_position_size']} at this size")

