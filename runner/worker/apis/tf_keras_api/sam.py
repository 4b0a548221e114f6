"""keras-cv 0.8 SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder) on Keras 2, the
Keras 2 column of the keras-hub table: the same configuration, inputs and training step as
keras_api/sam.py (the study's fit: SAM's backbone, the ViTDet image encoder, alone, MSE and Adam
against fixed random targets of its output shape, through train_on_batch).
"""

from __future__ import annotations

from .. import kerashub_models as hub


def build(spec, fw):
    hub.import_keras2("keras_cv")
    from keras_cv.src.models.backbones.vit_det.vit_det_backbone import ViTDetBackbone
    from keras_cv.src.models.segmentation.segment_anything import sam as sam_module
    from keras_cv.src.models.segmentation.segment_anything.sam_mask_decoder import SAMMaskDecoder
    from keras_cv.src.models.segmentation.segment_anything.sam_prompt_encoder import SAMPromptEncoder
    from keras_cv.src.models.segmentation.segment_anything.sam_transformer import TwoWayTransformer

    keras, batch = fw.keras, spec.batch_size
    preset = hub.local_preset(spec.options)
    if preset:
        model = sam_module.SegmentAnythingModel.from_preset(preset)
        side = int(model.backbone.input.shape[1])
        mask_side = 4 * int(model.prompt_encoder.image_embedding_size[0])
    else:
        cfg = hub.config(hub.SAM, spec.size)
        side, enc, dec = cfg["image_size"], cfg["encoder"], cfg["decoder"]
        embedding = side // enc["patch_size"]
        mask_side = 4 * embedding
        model = sam_module.SegmentAnythingModel(
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
                                              num_heads=dec["num_heads"], mlp_dim=dec["intermediate_dim"]),
                num_multimask_outputs=dec["num_multimask_outputs"],
                iou_head_depth=dec["iou_head_depth"], iou_head_hidden_dim=dec["iou_head_hidden_dim"]),
        )
    facts = dict(batch_size=batch, image_size=side, params=model.count_params(),
                 preset=preset or f"random weights, {spec.size} config")
    hub.seed_weights(model, spec, facts, preset)
    if spec.task == "fit":
        return hub.encoder_fit_bench(keras, model.backbone, side, batch, spec.seed, facts,
                                     fw.jit_compile(), hub.SAM_FIT_DOC)
    # keras-cv's predict_step mishandles the batch tf-keras hands it (a tuple): predict runs a
    # plain keras.Model over the SAM graph, with every prompt input given explicitly.
    x = hub.sam_inputs(spec.seed, batch, side, mask_side)
    trainer = keras.Model(model.input, model.output, name="sam")
    trainer.compile(jit_compile=fw.jit_compile())
    return hub.predict_bench(trainer, x, batch=batch,
                             effective={"jit_compile": hub.jit_in_effect(trainer)}, extra=facts)
