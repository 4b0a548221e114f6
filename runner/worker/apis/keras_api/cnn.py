"""The CNN on Keras, an adapter to the recipe (apis/cnn_recipe.py): the same code on every Keras 3
backend and on Keras 2 (tf_keras_api/cnn.py passes its tf_keras module as `fw.keras`).

fit: one `model.fit` runs the whole cell (warm-up, block calibration, timed blocks) through its
own loop and the data axis's feed (keras_api/feeds.py training_data); keras_fit_clock.BlockClock reads the
worker's clock in on_train_batch_begin at the end of each block of train-function calls,
synchronising the device there only, as the native loops do, and keeps Keras 3's batch-end
dispatch asynchronous as a plain `fit` does; `fit` stops as soon as the clock has its timed
calls. predict: one batch through the compiled predict function per call
(kerashub/benches.py's predict_bench). A quantized precision quantizes the model first
(keras_api/quantize.py: predict's modes, and float8 training), its error measured on the probe batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...bench import Bench
from ...protocol import CellSpec
from .. import KerasFramework
from .. import cnn_common as cc, cnn_recipe as recipe
from .. import keras_fit_clock
from . import quantize as keras_quantize
from .feeds import training_data
from ..kerashub import benches as hub_benches

OPTIMIZER = f"RMSprop(lr={cc.LEARNING_RATE}, rho={cc.RMS_RHO}, eps={cc.RMS_EPSILON})"


def build(spec: CellSpec, fw: KerasFramework) -> Bench:
    return recipe.build(spec, fw, predictor, trainer)


def model(fw: KerasFramework, weights: list[np.ndarray]) -> Any:
    keras, layers = fw.keras, fw.keras.layers
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        built = keras.Sequential([keras.Input(shape=cc.IMAGE_SHAPE)])
        for index, filters in enumerate(cc.CONV_FILTERS):
            built.add(layers.Conv2D(filters, cc.KERNEL, padding="same", activation="relu"))
            if index % 2 == 1:
                built.add(layers.MaxPooling2D(2))
        for layer in (layers.Flatten(), layers.Dense(cc.HIDDEN, activation="relu"),
                      layers.Dense(cc.CLASSES)):
            built.add(layer)
        built.set_weights(weights)
    return built


def predictor(spec: CellSpec, fw: KerasFramework, data: cc.CnnData,
              weights: list[np.ndarray]) -> recipe.Predictor:
    net = model(fw, weights)
    net.compile(jit_compile=fw.jit_compile())
    x_probe, _ = cc.probe(data)
    found = keras_quantize.apply(spec, fw, net, lambda: net.predict_on_batch(x_probe))
    bench = hub_benches.predict_bench(
        net, cc.predict_batch(spec, data), batch=spec.batch_size,
        effective={"jit_compile": hub_benches.jit_in_effect(net),
                   "compute_dtype": net.layers[0].compute_dtype})
    return recipe.Predictor(bench, net.count_params(), quantization=found)


def trainer(spec: CellSpec, fw: KerasFramework, data: cc.CnnData,
            weights: list[np.ndarray]) -> recipe.Trainer:
    net = model(fw, weights)

    def logits(x: np.ndarray) -> np.ndarray:
        return net.predict(x, batch_size=cc.EVAL_BATCH, verbose=0)

    found = keras_quantize.apply(       # float8 training (catalog/quantized_rules.py)
        spec, fw, net, lambda: logits(cc.probe(data)[0]))
    return recipe.Trainer(logits, net.count_params(), lambda extra: loop(spec, fw, net, data, extra),
                          quantization=found, evaluation_batch=len(data.y_test))


def loop(spec: CellSpec, fw: KerasFramework, net: Any, data: cc.CnnData,
         extra: dict[str, Any]) -> recipe.Loop:
    """model.compile with the shared optimizer, then one model.fit that runs the cell."""
    keras, per_call, backend = fw.keras, spec.steps_per_execution, fw.keras.backend.backend()
    with fw.data_parallel_scope():       # the optimizer's variables too
        net.compile(optimizer=keras.optimizers.RMSprop(
            learning_rate=cc.LEARNING_RATE, rho=cc.RMS_RHO, epsilon=cc.RMS_EPSILON),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=per_call, jit_compile=fw.jit_compile())
    fit_args, fed = training_data(keras, backend, data, spec.data, spec.seed)
    effective = {"jit_compile": bool(net.jit_compile),
                 "steps_per_execution": resolved_steps_per_execution(net),
                 "compute_dtype": net.layers[0].compute_dtype,
                 "variable_dtype": net.layers[0].variable_dtype, "data": fed,
                 "optimizer": OPTIMIZER}
    if backend == "torch" and effective["jit_compile"]:
        # Keras calls torch.compile(train_step) itself and takes no mode: a mode given in the
        # jit axis does not reach it.
        effective["torch_compile_mode"] = "default"
    sync = keras_fit_clock.state_sync(fw, net, backend)
    effective.update(keras_fit_clock.dispatch_facts(keras))
    drive = keras_fit_clock.fit_drive(
        keras, net, fit_args, per_call=per_call, steps_per_epoch=data.steps_per_epoch,
        extra=extra, after=lambda clock: extra.update(
            epoch_s=cc.epoch_estimate(clock, per_call, data)))
    return recipe.Loop(drive=drive, sync=sync, loss=float, timing=keras_fit_clock.TIMING,
                       effective=effective, steps_per_call=per_call, native=False)


def resolved_steps_per_execution(net: Any) -> int:
    value = net.steps_per_execution
    return int(value.numpy()) if hasattr(value, "numpy") else int(value)
