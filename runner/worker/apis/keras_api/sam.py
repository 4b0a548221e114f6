"""keras-hub SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder) on Keras 3.

predict: one batch of images with one point prompt each through predict_on_batch.
fit: keras-hub raises NotImplementedError for SAM, so this module defines the training step: a
plain keras.Model over the segmenter's own graph (image encoder + prompt encoder + mask decoder,
all trainable), compiled with AdamW and an MSE loss on the predicted masks and IoU scores against
fixed random targets, run through train_on_batch. Compute and memory are those of end-to-end SAM
training; the targets carry no meaning.
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
    x = hub.sam_inputs(spec.seed, batch, side, mask_side)
    facts = dict(batch_size=batch, image_size=side, params=segmenter.count_params(),
                 preset=preset or f"random weights, {spec.size} config")
    # The segmenter's predict_step mishandles the batch that predict_on_batch hands it (a tuple),
    # and its fit raises NotImplementedError: both tasks run a plain keras.Model over the
    # segmenter's own graph, with every prompt input given explicitly.
    trainer = keras.Model(segmenter.input, segmenter.output, name="sam")
    if spec.task == "predict":
        trainer.compile(jit_compile=fw.jit_compile())
        return hub.predict_bench(trainer, x, batch=batch,
                                 effective={"jit_compile": hub.jit_in_effect(trainer)}, extra=facts)

    out = trainer.compute_output_spec(
        {k: keras.KerasTensor(v.shape, dtype=str(v.dtype)) for k, v in x.items()})
    shapes = {k: (batch,) + tuple(v.shape[1:]) for k, v in out.items()}
    y = hub.random_targets(spec.seed, shapes)
    trainer.compile(optimizer=keras.optimizers.AdamW(1e-4),
                    loss={k: keras.losses.MeanSquaredError() for k in shapes},
                    jit_compile=fw.jit_compile())
    facts["training_step"] = hub.SAM_FIT_DOC
    return hub.fit_bench(trainer, x, y, batch=batch,
                         effective={"jit_compile": hub.jit_in_effect(trainer)}, extra=facts)
