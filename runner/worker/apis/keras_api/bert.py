"""keras-hub BERT text classifier (bert_base_en_uncased architecture, 2 classes) on Keras 3; the bench
is apis/kerashub/bert.py."""

from __future__ import annotations

from ..kerashub.bert import bert_bench


def build(spec, fw):
    import keras_hub

    models = keras_hub.models
    return bert_bench(spec, fw, backbone_cls=models.BertBackbone,
                      classifier=lambda backbone: models.BertTextClassifier(
                          backbone, num_classes=2, preprocessor=None))
