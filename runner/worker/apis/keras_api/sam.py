"""keras-hub SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder) on Keras 3.

predict: one batch of images with one point prompt each through predict_on_batch.
fit: the Keras 3 benchmark study's step (its sam/keras/fit.py compiles SAM's backbone alone with
MSE and Adam against random 64×64×256 features): the image encoder regresses fixed random
targets of its output shape, through train_on_batch (keras-hub raises NotImplementedError for
SAM's own fit). The targets carry no meaning.
"""

from __future__ import annotations

from .. import kerashub_models as hub


def build(spec, fw):
    import keras_hub

    keras, batch = fw.keras, spec.batch_size
    preset = hub.local_preset(spec.options)
    if preset:
        backbone = keras_hub.models.SAMBackbone.from_preset(preset)
    else:
        backbone = hub.keras_hub_backbone(keras_hub, "sam", spec.size)
    side = int(backbone.image_encoder.input.shape[1])
    mask_side = 4 * int(backbone.prompt_encoder.image_embedding_size[0])
    segmenter = keras_hub.models.SAMImageSegmenter(backbone=backbone, preprocessor=None)
    facts = dict(batch_size=batch, image_size=side, params=segmenter.count_params(),
                 preset=preset or f"random weights, {spec.size} config")
    hub.seed_weights(segmenter, spec, facts, preset)
    if spec.task == "fit":
        return hub.encoder_fit_bench(keras, backbone.image_encoder, side, batch, spec.seed, facts,
                                     fw.jit_compile(), hub.SAM_FIT_DOC)
    x = hub.sam_inputs(spec.seed, batch, side, mask_side)
    # The segmenter's predict_step mishandles the batch that predict_on_batch hands it (a tuple):
    # predict runs a plain keras.Model over the segmenter's own graph, with every prompt input
    # given explicitly.
    trainer = keras.Model(segmenter.input, segmenter.output, name="sam")
    trainer.compile(jit_compile=fw.jit_compile())
    return hub.predict_bench(trainer, x, batch=batch,
                             effective={"jit_compile": hub.jit_in_effect(trainer)}, extra=facts)
