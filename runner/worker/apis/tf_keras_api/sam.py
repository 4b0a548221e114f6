"""keras-cv 0.8 SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder) on Keras 2, the
Keras 2 column of the keras-hub table: the same configuration as keras-hub's (Keras 3); the bench
is apis/kerashub/sam.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub.configs import SAM, config
from ..kerashub.models import import_keras2, local_preset
from ..kerashub.sam import sam_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    import_keras2("keras_cv")
    from keras_cv.src.models.segmentation.segment_anything import sam as sam_module

    preset = local_preset(spec.options)
    if preset:
        model = sam_module.SegmentAnythingModel.from_preset(preset)
    else:
        model = sam_module.SegmentAnythingModel(**sam_parts(config(SAM, spec.size)))
    return sam_bench(spec, fw, model, image_encoder=model.backbone,
                     prompt_encoder=model.prompt_encoder, preset=preset)


def sam_parts(cfg: dict) -> dict:
    """keras-cv's backbone, prompt encoder and mask decoder for one configuration of configs.SAM."""
    from keras_cv.src.models.backbones.vit_det.vit_det_backbone import ViTDetBackbone
    from keras_cv.src.models.segmentation.segment_anything.sam_mask_decoder import SAMMaskDecoder
    from keras_cv.src.models.segmentation.segment_anything.sam_prompt_encoder import SAMPromptEncoder
    from keras_cv.src.models.segmentation.segment_anything.sam_transformer import TwoWayTransformer

    side, enc, dec = cfg["image_size"], cfg["encoder"], cfg["decoder"]
    embedding = side // enc["patch_size"]
    return dict(
        backbone=ViTDetBackbone(
            include_rescaling=False, input_shape=(side, side, 3), patch_size=enc["patch_size"],
            embed_dim=enc["hidden_size"], depth=enc["num_layers"], mlp_dim=enc["intermediate_dim"],
            num_heads=enc["num_heads"], out_chans=enc["num_output_channels"],
            window_size=enc["window_size"],
            global_attention_indices=enc["global_attention_layer_indices"]),
        prompt_encoder=SAMPromptEncoder(
            embed_dim=cfg["prompt"]["hidden_size"], image_embedding_size=(embedding, embedding),
            input_image_size=(side, side), mask_in_chans=cfg["prompt"]["mask_in_channels"]),
        mask_decoder=SAMMaskDecoder(
            transformer_dim=dec["hidden_size"],
            transformer=TwoWayTransformer(depth=dec["num_layers"], embed_dim=dec["embedding_dim"],
                                          num_heads=dec["num_heads"],
                                          mlp_dim=dec["intermediate_dim"]),
            num_multimask_outputs=dec["num_multimask_outputs"],
            iou_head_depth=dec["iou_head_depth"], iou_head_hidden_dim=dec["iou_head_hidden_dim"]),
    )
