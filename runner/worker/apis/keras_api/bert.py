"""keras-hub BERT text classifier (bert_base_en_uncased architecture, 2 classes) on Keras 3; the bench
is apis/kerashub/bert.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub.bert import bert_bench
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    import keras_hub

    models = keras_hub.models
    return bert_bench(spec, fw, backbone_cls=models.BertBackbone,
                      classifier=lambda backbone: models.BertTextClassifier(
                          backbone, num_classes=2, preprocessor=None))
