"""fit()'s data arguments for the data axis (the CNN's Keras cells, Keras 2's too, and a user
workload's `keras_data`): the shared feeds of apis/feeds.py, picked by the Keras backend."""

from __future__ import annotations

from typing import Any

from ..cnn_common import TrainingArrays
from ..feeds import (DATASET_TEXT, LOADER_TEXT, PYDATASET_TEXT, keras_batches, tf_dataset,
                     torch_loader)


def training_data(keras: Any, backend: str, data: TrainingArrays, how: str,
                  seed: int) -> tuple[dict[str, Any], str]:
    """fit()'s data arguments for the data axis, and what they are. A pipeline shuffles in the
    shared order itself, so fit's own shuffle is off for it."""
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
        return {"x": tf_dataset(x, y, batch, seed), "shuffle": False}, DATASET_TEXT
    if backend == "torch":
        import torch

        loader = torch_loader(x, y, batch, seed, pin=torch.cuda.is_available())
        return {"x": loader, "shuffle": False}, LOADER_TEXT
    # JAX: no TensorFlow in this environment; Keras' own backend-neutral pipeline.
    return {"x": keras_batches(keras, data, seed), "shuffle": False}, PYDATASET_TEXT
