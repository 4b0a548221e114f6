"""The CNN trained with `model.fit` (predict: one batch through the predict function,
predict_bench): the same code on every Keras 3 backend, and on Keras 2 (tf_keras_api/cnn.py
calls `fit_bench` and `predict_bench` with the tf_keras module).

Timing: one `fit` call runs the whole cell (warm-up, block calibration, timed blocks) through its
own loop and data pipeline; keras_fit_clock.BlockClock reads the worker's clock in
on_train_batch_begin at the end of each block of train-function calls, synchronising the device
there only, as the native loops do. Its batch-end hook is marked async-safe, so Keras 3 keeps
dispatching batch-end callbacks asynchronously, as a plain `fit` does. `fit` stops
(model.stop_training) as soon as the clock has its timed calls.
"""

from __future__ import annotations


from typing import Any

import numpy as np

from .. import KerasFramework
from ...protocol import CellSpec
from ...bench import Bench
from .. import cnn_common as cc
from .. import keras_fit_clock, quantized
from . import quantize as keras_quantize
from ..kerashub import benches as hub_benches
from . import Framework


def build(spec: CellSpec, fw: Framework) -> Bench:
    if spec.task == "predict":
        return predict_bench(spec, fw, fw.keras)
    return fit_bench(spec, fw, fw.keras, backend=fw.keras.backend.backend())


def predict_bench(spec: CellSpec, fw: KerasFramework, keras: Any) -> Bench:
    """One batch through the compiled predict function per call (kerashub/benches.py's
    predict_bench, Keras 2 and 3 alike); a quantized precision quantizes the model first
    (keras_api/quantize.py), its error measured on the probe batch."""
    data = cc.make_data(spec)
    weights = cc.initial_weights(spec.seed)
    model = build_model(keras, weights)
    model.compile(jit_compile=fw.jit_compile())
    x_probe, _ = cc.probe(data)
    found = keras_quantize.apply(spec, fw, model, lambda: model.predict_on_batch(x_probe))
    bench = hub_benches.predict_bench(
        model, cc.predict_batch(spec, data), batch=spec.batch_size,
        effective={"jit_compile": hub_benches.jit_in_effect(model),
                   "compute_dtype": model.layers[0].compute_dtype},
        extra=cc.predict_extra(data, weights, model.count_params()))
    bench.answer = lambda: cc.predict_answer(bench.call_step())
    return quantized.record(bench, found)


def build_model(keras, weights: list[np.ndarray]):
    layers = keras.layers
    model = keras.Sequential([keras.Input(shape=cc.IMAGE_SHAPE)])
    for index, filters in enumerate(cc.CONV_FILTERS):
        model.add(layers.Conv2D(filters, cc.KERNEL, padding="same", activation="relu"))
        if index % 2 == 1:
            model.add(layers.MaxPooling2D(2))
    model.add(layers.Flatten())
    model.add(layers.Dense(cc.HIDDEN, activation="relu"))
    model.add(layers.Dense(cc.CLASSES))
    model.set_weights(weights)
    return model


def training_data(keras, backend: str, data: cc.TrainingArrays, how: str,
                  seed: int) -> tuple[dict, str]:
    """fit() arguments for the data axis, and what they are. Pipelines shuffle themselves, so
    fit's own shuffle is off for them."""
    x, y, batch = data.x_train, data.y_train, data.batch_size
    if how == "arrays":
        return {"x": x, "y": y, "batch_size": batch, "shuffle": True}, "NumPy arrays to fit()"
    if how == "device":
        if hasattr(keras, "ops"):                   # Keras 3: the backend's own tensor type
            to_tensor = keras.ops.convert_to_tensor
        else:                                       # Keras 2
            import tensorflow as tf

            to_tensor = tf.convert_to_tensor
        return ({"x": to_tensor(x), "y": to_tensor(y), "batch_size": batch, "shuffle": True},
                f"{backend} tensors made before fit() (on the default device)")
    if backend == "tensorflow":
        import tensorflow as tf

        dataset = (tf.data.Dataset.from_tensor_slices((x, y))
                   .shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
                   .batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
        return {"x": dataset, "shuffle": False}, "tf.data: shuffle, batch, prefetch(AUTOTUNE)"
    if backend == "torch":
        import torch

        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
            batch_size=batch, shuffle=True, drop_last=True, pin_memory=torch.cuda.is_available())
        return {"x": loader, "shuffle": False}, "torch DataLoader(shuffle, pin_memory on GPU, no workers)"
    # JAX: no TensorFlow in this environment; Keras' own backend-neutral pipeline.
    return {"x": shuffled_batches(keras, data, seed), "shuffle": False}, \
        "keras.utils.PyDataset (2 worker threads, queue of 10 batches)"


def shuffled_batches(keras, data: cc.TrainingArrays, seed: int):
    """A PyDataset that reshuffles every epoch, like the other pipelines."""
    class Batches(keras.utils.PyDataset):
        def __init__(self):
            super().__init__(workers=2, use_multiprocessing=False, max_queue_size=10)
            self.epoch = 0
            self.order = np.random.default_rng([seed, 2, 0]).permutation(len(data.y_train))

        def __len__(self):
            return data.steps_per_epoch

        def __getitem__(self, index):
            picked = self.order[index * data.batch_size:(index + 1) * data.batch_size]
            return data.x_train[picked], data.y_train[picked]

        def on_epoch_end(self):
            self.epoch += 1
            self.order = np.random.default_rng([seed, 2, self.epoch]).permutation(len(data.y_train))

    return Batches()


def resolved_steps_per_execution(model) -> int:
    value = model.steps_per_execution
    return int(value.numpy()) if hasattr(value, "numpy") else int(value)


def fit_bench(spec: CellSpec, fw: KerasFramework, keras: Any, backend: str) -> Bench:
    data = cc.make_data(spec)
    weights = cc.initial_weights(spec.seed)
    with fw.data_parallel_scope():       # a data-parallel cell's variables: on every device
        model = build_model(keras, weights)
    x_probe, y_probe = cc.probe(data)
    found = keras_quantize.apply(       # float8 training (catalog/quantized_rules.py)
        spec, fw, model, lambda: model.predict(x_probe, batch_size=cc.EVAL_BATCH, verbose=0))
    initial = cc.initial_extra(model.predict(x_probe, batch_size=cc.EVAL_BATCH, verbose=0), y_probe)
    per_call = spec.steps_per_execution
    with fw.data_parallel_scope():       # ... and the optimizer's
        model.compile(
            optimizer=keras.optimizers.RMSprop(learning_rate=cc.LEARNING_RATE, rho=cc.RMS_RHO,
                                               epsilon=cc.RMS_EPSILON),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=per_call, jit_compile=fw.jit_compile())
    fit_args, data_text = training_data(keras, backend, data, spec.data, spec.seed)
    extra = cc.base_extra(data, weights, model.count_params(), initial)
    effective = {
        "jit_compile": bool(model.jit_compile),
        "steps_per_execution": resolved_steps_per_execution(model),
        "compute_dtype": model.layers[0].compute_dtype,
        "variable_dtype": model.layers[0].variable_dtype,
        "data": data_text,
        "optimizer": f"RMSprop(lr={cc.LEARNING_RATE}, rho={cc.RMS_RHO}, eps={cc.RMS_EPSILON})",
    }
    if backend == "torch" and effective["jit_compile"]:
        # Keras calls torch.compile(train_step) itself and takes no mode: a mode given in the
        # jit axis does not reach it.
        effective["torch_compile_mode"] = "default"

    sync_state = keras_fit_clock.state_sync(fw, model, backend)
    effective.update(keras_fit_clock.dispatch_facts(keras))
    drive = keras_fit_clock.fit_drive(
        keras, model, fit_args, per_call=per_call, steps_per_epoch=data.steps_per_epoch,
        extra=extra, after=lambda clock: extra.update(
            epoch_s=cc.epoch_estimate(clock, per_call, data)))

    return quantized.record(Bench(
        drive=drive, items_per_step=spec.batch_size, steps_per_call=per_call,
        calls_per_epoch=data.steps_per_epoch // per_call,
        loss=float, sync=sync_state,
        evaluate=lambda: cc.evaluation(
            lambda x: model.predict(x, batch_size=cc.EVAL_BATCH, verbose=0), data,
            batch=len(data.y_test)),
        timing=keras_fit_clock.TIMING,
        effective=effective,
        extra=extra, **cc.answer_fields(spec, initial, native_loop=False)), found)
