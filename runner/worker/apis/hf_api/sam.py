"""SegmentAnything on Hugging Face's code: transformers' SamModel with the keras-hub cell's
configuration (sam_huge_sa1b at full size, 641 090 864 parameters). transformers' SamVisionConfig
defaults to ViT-B (although its docstring names the huge model): every dimension of the vision
encoder is set explicitly from the keras-hub configuration, ViT-H at full size.

predict: one batch of the keras-hub cell's images with one point prompt each through the image
encoder, the prompt encoder and the mask decoder (multimask output). fit: the study's step, as the
Keras cell: the vision encoder alone regresses fixed random targets of its output shape, MSE, Adam.

No answer is compared: transformers' SAM lays out its ~500 weight tensors (fused query-key-value
projections, relative-position tables, neck) differently from keras-hub's and no weight map is
written, so its random weights are not the Keras cells'; and its mask decoder returns the three
multimask outputs where keras-hub's returns four. The record says so (extra.answer_note).
"""

from __future__ import annotations

import torch

from ...bench import Bench
from ...protocol import CellSpec
from ..huggingface import benches
from ..kerashub.configs import SAM, config
from ..kerashub.inputs import sam_inputs
from ..kerashub.sam import SAM_FIT_DOC
from . import Framework

ANSWER_NOTE = ("transformers' SamModel names and lays out its weights differently from "
               "keras-hub's and no weight map is written: its random weights are not the Keras "
               "cells', so its answer is not compared (and its decoder returns 3 masks, "
               "keras-hub's 4)")


def hf_config(cfg: dict):
    from transformers import (SamConfig, SamMaskDecoderConfig, SamPromptEncoderConfig,
                              SamVisionConfig)

    side, encoder, prompt, decoder = cfg["image_size"], cfg["encoder"], cfg["prompt"], cfg["decoder"]
    return SamConfig(
        vision_config=SamVisionConfig(
            hidden_size=encoder["hidden_size"], num_hidden_layers=encoder["num_layers"],
            num_attention_heads=encoder["num_heads"], mlp_dim=encoder["intermediate_dim"],
            global_attn_indexes=list(encoder["global_attention_layer_indices"]),
            patch_size=encoder["patch_size"], output_channels=encoder["num_output_channels"],
            window_size=encoder["window_size"], image_size=side,
            num_pos_feats=prompt["hidden_size"] // 2, initializer_range=0.02),
        prompt_encoder_config=SamPromptEncoderConfig(
            hidden_size=prompt["hidden_size"], image_size=side, patch_size=encoder["patch_size"],
            mask_input_channels=prompt["mask_in_channels"]),
        mask_decoder_config=SamMaskDecoderConfig(
            hidden_size=decoder["hidden_size"], mlp_dim=decoder["intermediate_dim"],
            num_hidden_layers=decoder["num_layers"], num_attention_heads=decoder["num_heads"],
            num_multimask_outputs=decoder["num_multimask_outputs"],
            iou_head_depth=decoder["iou_head_depth"],
            iou_head_hidden_dim=decoder["iou_head_hidden_dim"]))


def build(spec: CellSpec, fw: Framework) -> Bench:
    from transformers import SamModel

    benches.no_preset(spec)
    cfg, batch = config(SAM, spec.size), spec.batch_size
    side = cfg["image_size"]
    model = SamModel(hf_config(cfg))
    facts = dict(batch_size=batch, image_size=side,
                 params=sum(p.numel() for p in model.parameters()),
                 preset=f"random weights, {spec.size} config", answer_note=ANSWER_NOTE)
    precision = benches.Precision(fw, spec.precision)
    model.to(fw.torch_device, precision.param_dtype)
    if spec.task == "fit":
        model.train()
        return benches.encoder_fit_bench(fw, precision, model.vision_encoder, side=side,
                                         batch=batch, seed=spec.seed, facts=facts,
                                         doc=SAM_FIT_DOC)
    model.eval()
    x = sam_inputs(spec.seed, batch, side, 4 * (side // cfg["encoder"]["patch_size"]))
    inputs = benches.tensors(fw, {"pixel_values": x["images"].transpose(0, 3, 1, 2),
                                  "input_points": x["points"][:, None]},
                             precision.param_dtype)
    inputs["input_labels"] = torch.from_numpy(x["labels"][:, None]).to(fw.torch_device,
                                                                      torch.int64)
    run = fw.compile(model)

    def forward():
        out = run(**inputs, multimask_output=True)
        return {"pred_masks": out.pred_masks, "iou_scores": out.iou_scores}

    out = benches.predict_bench(fw, precision, forward, batch=batch,
                                effective={"jit_compile": benches.compiled(fw)}, extra=facts)
    out.answer = None
    return out
