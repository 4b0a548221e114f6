"""keras-nlp 0.8 BERT classifier (bert_base_en architecture, 2 classes) on Keras 2, the Keras 2
column of the keras-hub table: the same configuration, inputs and steps as keras_api/bert.py.
"""

from __future__ import annotations

from .. import kerashub_models as hub


def build(spec, fw):
    keras_nlp = hub.import_keras2("keras_nlp")
    keras, size, batch = fw.keras, spec.size, spec.batch_size
    preset = hub.local_preset(spec.options)
    if preset:
        backbone = keras_nlp.models.BertBackbone.from_preset(preset)
    else:
        backbone = keras_nlp.models.BertBackbone(**hub.config(hub.BERT, size))
    length = int(spec.options["sequence_length"])
    classifier = keras_nlp.models.BertClassifier(backbone, num_classes=2, preprocessor=None)
    # keras-nlp 0.8's train_on_batch / predict_on_batch pass dict inputs to convert_to_tensor and
    # fail; a plain keras.Model over the classifier's own graph runs the same computation.
    model = keras.Model(classifier.input, classifier.output, name="bert_classifier")
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
