"""A data-parallel cell's feeds for the native loops (the data axis on several devices): every
global batch in the shared order (cnn_common.batch_indices), split the framework's way. Each
framework's import is inside its function.

- native JAX: the global batch sharded along the mesh's batch axis (jax_sharding.py);
- native TensorFlow: each replica's share made on its own device (tf_mirrored.py);
- native torch needs none: each DDP rank slices its own share (Shards.own) in the torch feed.

A native loop's data = "dataset" has no sharded pipeline (catalog/rules.py plans it not
applicable): the rows' way stands in for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..feeds import Fed, Ways
from . import Shards


def jax_sharded(sharded: Any, x: np.ndarray, y: np.ndarray, order: Iterator[np.ndarray]) -> Ways:
    """jax.sharding: the arrays on every device, each gathering its share of the batch per
    step; or each step's NumPy rows put on the devices sharded along the batch."""
    import jax

    def preloaded() -> Fed:
        gather = sharded.gather()
        x_dev, y_dev = (jax.device_put(a, sharded.replicated) for a in (x, y))
        indices = (jax.device_put(o, sharded.replicated) for o in order)
        return ((gather(x_dev, i), gather(y_dev, i)) for i in indices), \
            "arrays preloaded on every device, each gathering its share of the batch per step"

    def rows() -> Fed:
        return (jax.device_put((x[o], y[o]), sharded.batch) for o in order), \
            "NumPy arrays sliced per step, put on the devices sharded along the batch"

    return Ways(arrays=rows, dataset=rows, device=preloaded)


def tf_mirrored(strategy: Any, shards: Shards, x: np.ndarray, y: np.ndarray,
                order: Iterator[np.ndarray]) -> Ways:
    """MirroredStrategy: each replica's share of the global batch made on its device (the
    arrays copied to every device once and gathered there, or NumPy rows converted there)."""
    import tensorflow as tf

    from .tf_mirrored import per_replica

    def share(rows: np.ndarray, replica: int) -> np.ndarray:
        return rows[replica * shards.per_device:(replica + 1) * shards.per_device]

    def preloaded() -> Fed:
        copies = []
        for device in strategy.extended.worker_devices:    # copied there once, explicitly
            with tf.device(device):
                copies.append((tf.identity(x), tf.identity(y)))

        def gathered(o: np.ndarray) -> Any:
            return per_replica(strategy, lambda replica: tuple(
                tf.gather(part, share(o, replica).astype(np.int32)) for part in copies[replica]))

        return (gathered(o) for o in order), \
            "tensors preloaded on every device, each gathering its share per step"

    def converted(o: np.ndarray) -> Any:
        return per_replica(strategy, lambda replica: tuple(
            tf.convert_to_tensor(a[share(o, replica)]) for a in (x, y)))

    def rows() -> Fed:
        return (converted(o) for o in order), \
            "NumPy arrays sliced per step, each replica's share converted to tensors on its device"

    return Ways(arrays=rows, dataset=rows, device=preloaded)
