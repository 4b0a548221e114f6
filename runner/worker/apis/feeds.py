"""The data axis (arrays | dataset | device): how a training step gets its batches, written once for
Keras and the native loops alike. Each framework's import is inside the feed that uses it.

One order on every API: every feed the worker makes draws its batches in
`cnn_common.epoch_orders`' order — a fresh permutation of the training rows every epoch, seeded
by the cell's seed and the epoch number, whole batches only — so that the same cell feeds the
same batches on every API, whatever the pipeline. The one order that is not the worker's: arrays
or tensors handed to Keras' fit() (data = "arrays" | "device" on Keras), which fit shuffles
itself (shuffle=True, the way Keras users feed it).

- `chosen(mode, ways)`: the native loops' switch — each API supplies its three ways (`Ways`);
- `tf_dataset`: tf.data (Keras on TensorFlow, Keras 2, native TensorFlow);
- `torch_loader`: torch's DataLoader (Keras on torch, native torch);
- `keras_batches`: Keras' own PyDataset (Keras on JAX, whose environment has no TensorFlow);
- `prefetched`: a thread that puts host batches on the device ahead of the step (native JAX).

Keras' fit() picks among them by its backend: keras_api/feeds.py `training_data`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cnn_common import TrainingArrays, epoch_orders

# An endless iterator of (images, labels) batches, and what it is in words (effective["data"]).
Fed = tuple[Iterator[Any], str]
PREFETCH = 2                    # batches the native JAX loop's thread keeps ready on the device
KERAS_WORKERS, KERAS_QUEUE = 2, 10


@dataclass(frozen=True)
class Ways:
    """An API's three ways of feeding its own loop, one per value of the data axis; each makes
    the endless batches when the cell asks for it."""

    arrays: Callable[[], Fed]       # NumPy rows sliced per step, copied to the device
    dataset: Callable[[], Fed]      # the framework's input pipeline
    device: Callable[[], Fed]       # the training set on the device once, batches gathered there


def chosen(mode: str, ways: Ways) -> Fed:
    """The data axis's one switch for the loops the worker drives."""
    if mode not in ("arrays", "dataset", "device"):
        raise ValueError(f"data = {mode!r}: expected arrays, dataset or device")
    made: Fed = getattr(ways, mode)()
    return made


class EpochRows:
    """One epoch of index rows per iteration, the next epoch's at the next: a pipeline iterated
    once per epoch (fit, a DataLoader, a finite tf.data dataset) reshuffles as the shared order
    does."""

    def __init__(self, samples: int, batch_size: int, seed: int) -> None:
        self.epochs = epoch_orders(samples, batch_size, seed)
        self.steps = samples // batch_size

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        return iter(next(self.epochs).tolist())


DATASET_TEXT = "tf.data: the seeded epoch order's index batches, gathered, prefetch(AUTOTUNE)"


def tf_dataset(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int,
               repeat: bool = False) -> Any:
    """tf.data over the arrays: each epoch's index rows (EpochRows, from a generator: only the
    indices cross Python), each batch gathered from the arrays held once in the pipeline,
    prefetched. repeat: endless, for a loop that iterates it once (its prefetching runs on
    across epochs)."""
    import tensorflow as tf

    epoch = EpochRows(len(y), batch_size, seed)
    indices = tf.data.Dataset.from_generator(
        lambda: iter(epoch), output_signature=tf.TensorSpec((batch_size,), tf.int64))
    dataset = tf.data.Dataset.zip((tf.data.Dataset.from_tensors((x, y)).repeat(), indices)).map(
        lambda arrays, picked: (tf.gather(arrays[0], picked), tf.gather(arrays[1], picked)))
    return (dataset.repeat() if repeat else dataset).prefetch(tf.data.AUTOTUNE)


LOADER_TEXT = "torch DataLoader(the seeded epoch order, pin_memory on GPU, no workers)"


def torch_loader(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, pin: bool) -> Any:
    """torch's DataLoader over the arrays (a TensorDataset), its batches the shared order's rows
    (a batch sampler that reshuffles every epoch), in the main process."""
    import torch

    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
        batch_sampler=EpochRows(len(y), batch_size, seed), pin_memory=pin)


PYDATASET_TEXT = (f"keras.utils.PyDataset ({KERAS_WORKERS} worker threads, queue of "
                  f"{KERAS_QUEUE} batches)")


def keras_batches(keras: Any, data: TrainingArrays, seed: int) -> Any:
    """Keras' PyDataset over the arrays in the shared order, reshuffled at every epoch's end."""

    class Batches(keras.utils.PyDataset):
        def __init__(self) -> None:
            super().__init__(workers=KERAS_WORKERS, use_multiprocessing=False,
                             max_queue_size=KERAS_QUEUE)
            self.epochs = epoch_orders(len(data.y_train), data.batch_size, seed)
            self.order = next(self.epochs)

        def __len__(self) -> int:
            return data.steps_per_epoch

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            picked = self.order[index]
            return data.x_train[picked], data.y_train[picked]

        def on_epoch_end(self) -> None:
            self.order = next(self.epochs)

    return Batches()


def sliced(x: np.ndarray, y: np.ndarray, order: Iterator[np.ndarray],
           put: Callable[[np.ndarray], Any] | None, text: str) -> Fed:
    """data = "arrays" in a native loop: each step's rows sliced from the NumPy arrays, `put`
    where the step reads them (None: as they are, for a call that copies them itself)."""
    if put is None:
        return ((x[rows], y[rows]) for rows in order), text
    return ((put(x[rows]), put(y[rows])) for rows in order), text


def forever(pipeline: Any) -> Iterator[Any]:
    """A pipeline iterated once per epoch (a DataLoader), iterated endlessly: one loop's feed."""
    while True:
        yield from pipeline


def prefetched(batches: Iterator[Any], put: Callable[[Any], Any],
               ahead: int = PREFETCH) -> Iterator[Any]:
    """Host batches put on the device by a background thread, `ahead` batches ahead (like
    flax.jax_utils.prefetch_to_device)."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=ahead)

    def fill() -> None:
        for batch in batches:
            ready.put(put(batch))

    threading.Thread(target=fill, daemon=True).start()
    while True:
        yield ready.get()
