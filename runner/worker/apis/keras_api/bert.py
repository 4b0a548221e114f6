"""keras-hub BERT text classifier (bert_base_en architecture, 2 classes) on Keras 3.

fit: one batch of random token ids and labels through train_on_batch (AdamW, sparse categorical
cross-entropy on logits); predict: one batch through predict_on_batch. Sequence length 512 at full
size, as in the study (options.sequence_length).
"""

from __future__ import annotations

from .. import kerashub_models as hub


def build(spec, fw):
    import keras_hub

    keras, size, batch = fw.keras, spec.size, spec.batch_size
    preset = hub.local_preset(spec.options)
    if preset:
        backbone = keras_hub.models.BertBackbone.from_preset(preset)
    else:
        backbone = hub.keras_hub_backbone(keras_hub, "bert", size)
    length = int(spec.options["sequence_length"])
    if length > backbone.max_sequence_length:
        raise ValueError(f"sequence_length {length} > the model's {backbone.max_sequence_length}")
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(5e-5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[], jit_compile=fw.jit_compile())
    x, y = hub.bert_inputs(spec.seed, batch, length, backbone.vocabulary_size)
    facts = dict(sequence_length=length, batch_size=batch, params=model.count_params(),
                 preset=preset or f"random weights, {size} config")
    hub.seed_weights(model, spec, facts, preset)
    effective = {"jit_compile": hub.jit_in_effect(model)}
    if spec.task == "fit":
        # Dropout draws from each backend's own generator: the first loss is no answer.
        return hub.fit_bench(model, x, y, batch=batch, effective=effective, extra=facts,
                             deterministic=False)
    return hub.predict_bench(model, x, batch=batch, effective=effective, extra=facts)
