"""BERT text classifier (bert_base_en_uncased architecture, 2 classes), written once for both Keras
generations: keras_api/bert.py injects keras-hub's classes (Keras 3), tf_keras_api/bert.py
keras-nlp 0.8's (Keras 2); the configuration, inputs and steps are the same.

fit: one batch of random token ids and labels through the train function (AdamW, sparse
categorical cross-entropy on logits); predict: one batch through the predict function. Sequence
length 512 at full size, as in the study (options.sequence_length).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from ...protocol import CellSpec
from .. import KerasFramework
from ...bench import Bench
from .. import quantized
from ..keras_api import quantize as keras_quantize
from .benches import fit_bench, jit_in_effect, predict_bench
from .configs import BERT, config
from .inputs import bert_inputs, seed_weights
from .models import local_preset


def bert_bench(spec: CellSpec, fw: KerasFramework, *, backbone_cls,
               classifier: Callable[[Any], Any]) -> Bench:
    """`classifier(backbone)`: the 2-class classifier model over the backbone, without a
    preprocessor."""
    keras, size, batch = fw.keras, spec.size, spec.batch_size
    preset = local_preset(spec.options)
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        backbone = backbone_cls.from_preset(preset) if preset else \
            backbone_cls(**config(BERT, size))
        model = classifier(backbone)
        model.compile(optimizer=keras.optimizers.AdamW(5e-5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[], jit_compile=fw.jit_compile())
    length = int(spec.options["sequence_length"])
    if length > backbone.max_sequence_length:
        raise ValueError(f"sequence_length {length} > the model's {backbone.max_sequence_length}")
    x, y = bert_inputs(spec.seed, batch, length, backbone.vocabulary_size)
    facts = dict(sequence_length=length, batch_size=batch, params=model.count_params(),
                 preset=preset or f"random weights, {size} config")
    seed_weights(model, spec, facts, preset)
    effective = {"jit_compile": jit_in_effect(model)}
    strategy = getattr(fw, "strategy", None)          # TensorFlow's, in a data-parallel cell
    # A quantized precision (fit: float8 training only, catalog/quantized_rules.py).
    found = keras_quantize.apply(spec, fw, model, lambda: model.predict_on_batch(x))
    if spec.task == "fit":
        # Dropout draws from each backend's own generator: the first loss is no answer.
        return quantized.record(fit_bench(model, x, y, batch=batch, effective=effective,
                                          extra=facts, deterministic=False, strategy=strategy),
                                found)
    return quantized.record(predict_bench(model, x, batch=batch, effective=effective,
                                          extra=facts, strategy=strategy), found)
