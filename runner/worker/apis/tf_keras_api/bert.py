"""keras-nlp 0.8 BERT classifier (bert_base_en_uncased architecture, 2 classes) on Keras 2, the Keras 2
column of the keras-hub table; the bench is apis/kerashub/bert.py."""

from __future__ import annotations

from ...bench import Bench
from ...protocol import CellSpec
from ..kerashub.bert import bert_bench
from ..kerashub.models import import_keras2
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    models = import_keras2("keras_nlp").models

    def classifier(backbone):
        built = models.BertClassifier(backbone, num_classes=2, preprocessor=None)
        # keras-nlp 0.8's train_on_batch / predict_on_batch pass dict inputs to convert_to_tensor
        # and fail; a plain keras.Model over the classifier's own graph runs the same computation.
        return fw.keras.Model(built.input, built.output, name="bert_classifier")

    return bert_bench(spec, fw, backbone_cls=models.BertBackbone, classifier=classifier)
