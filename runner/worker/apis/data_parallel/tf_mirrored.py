"""TensorFlow's data-parallel cells (native TensorFlow, Keras 3 on TensorFlow and Keras 2;
docs/scaling.md): tf.distribute.MirroredStrategy over the cell's devices, variables mirrored on
each, every step's global batch split between the replicas and the gradients all-reduced (NCCL
on GPUs; on a CPU, TensorFlow's collectives between logical CPU devices, which must be made
before anything else touches the runtime).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from .. import FrameworkBase


def split_cpu(devices: int) -> None:
    """The CPU as `devices` logical devices (before TensorFlow's runtime starts)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(devices)])


def strategy_for(fw: FrameworkBase) -> Any:
    """The cell's MirroredStrategy, on its GPUs (the lane's, CUDA_VISIBLE_DEVICES) or on the
    logical CPUs split_cpu made; what it is goes to effective.data_parallel."""
    kind = "GPU" if fw.device == "gpu" else "CPU"
    found = tf.config.list_logical_devices(kind)
    wanted = fw.shards.devices
    if len(found) < wanted:
        raise RuntimeError(f"devices = {wanted} but TensorFlow sees {len(found)} {kind} "
                           "device(s)")
    strategy = tf.distribute.MirroredStrategy([d.name for d in found[:wanted]])
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    fw.effective["data_parallel"] = fw.shards.facts(
        "tf.distribute.MirroredStrategy", replicas=strategy.num_replicas_in_sync,
        devices=list(strategy.extended.worker_devices),
        all_reduce=type(ops).__name__ if ops is not None else "unknown")
    return strategy


def distributed_batches(strategy: Any, *parts: Any) -> Any:
    """One global batch ((x,), (x, y), (x, y, sample weight); NumPy or dicts of it), repeated,
    as an iterator of per-replica shares: what a Keras train or predict function reads in fit
    (train_on_batch would hand every replica the whole batch)."""
    data = tuple(part for part in parts if part is not None)
    first = tf.nest.flatten(data)[0]
    dataset = tf.data.Dataset.from_tensor_slices(data).batch(len(first)).repeat()
    return iter(strategy.experimental_distribute_dataset(dataset))


def mirrored_step(strategy: Any, replica_loss: Any, update: Any, weights: list[Any],
                  slots: list[Any]) -> Any:
    """A training step over the replicas, written as Keras 2's optimizers apply one: each
    replica's loss (on its share, scaled by the global batch: replica_loss(x, y)) and gradients,
    one all-reduce of the gradients (batch_reduce_to), then `update(weight, gradient, slot)` on
    every device's copy (extended.update). Returns the global batch's loss."""

    def replica(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = replica_loss(xb, yb)
        return loss, tape.gradient(loss, weights)

    def step(xb: Any, yb: Any) -> Any:
        loss, grads = strategy.run(replica, args=(xb, yb))
        reduced = strategy.extended.batch_reduce_to(
            tf.distribute.ReduceOp.SUM, list(zip(grads, weights, strict=True)))
        for weight, grad, slot in zip(weights, reduced, slots, strict=True):
            strategy.extended.update(weight, update, args=(grad, slot))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)

    return step


def per_replica(strategy: Any, shares: Any) -> Any:
    """Values made on each replica's device: shares(replica id) → that replica's tensors."""
    return strategy.experimental_distribute_values_from_function(
        lambda context: shares(context.replica_id_in_sync_group))
