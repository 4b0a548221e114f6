"""keras-hub SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder) on Keras 3; the
bench is apis/kerashub/sam.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub.models import keras_hub_backbone, local_preset
from ..kerashub.sam import sam_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    import keras_hub

    preset = local_preset(spec.options)
    if preset:
        backbone = keras_hub.models.SAMBackbone.from_preset(preset)
    else:
        backbone = keras_hub_backbone(keras_hub, "sam", spec.size)
    segmenter = keras_hub.models.SAMImageSegmenter(backbone=backbone, preprocessor=None)
    return sam_bench(spec, fw, segmenter, image_encoder=backbone.image_encoder,
                     prompt_encoder=backbone.prompt_encoder, preset=preset)
