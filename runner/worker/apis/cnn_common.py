"""What every API's `cnn` workload shares: the model's shape, the optimizer settings, the synthetic
data, the initial weights, the batch order, and the epoch-time estimate. Standard library and
NumPy only, so that every API trains the same model from the same numbers on the same data.

The model (Keras layout; every API builds the same function):

    Conv2D(32, 3×3, same, relu) → Conv2D(32, 3×3, same, relu) → MaxPool(2)
    Conv2D(64, 3×3, same, relu) → Conv2D(64, 3×3, same, relu) → MaxPool(2)
    Flatten (7×7×64 in height, width, channel order) → Dense(158, relu) → Dense(10) logits

562 228 parameters; RMSprop(learning rate 1e-4, rho 0.9, epsilon 1e-7), sparse cross-entropy on
logits. Keras, Optax and the TensorFlow module add epsilon inside the square root
(lr·g/√(v+ε)); torch.optim.RMSprop adds it outside (lr·g/(√v+ε)), its one departure.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from typing import Any, Protocol
from collections.abc import Callable, Iterator

import numpy as np

from ..protocol import CellSpec
from ..bench import Bench, StepClock, run_loop
from . import answers

IMAGE_SHAPE = (28, 28, 1)                 # height, width, channels (channels-last, as in Keras)
CLASSES = 10
CONV_FILTERS = (32, 32, 64, 64)           # 3×3 kernels, "same" padding, max-pool after the 2nd and 4th
KERNEL = 3
HIDDEN = 158
FLAT = 7 * 7 * CONV_FILTERS[-1]           # 28 → 14 → 7 after two 2×2 max-pools
NOISE = 0.3                               # pixel noise (standard deviation) on prototypes in [0, 1]
EVAL_BATCH = 256                          # held-out split and probe: whole batches of this size
LEARNING_RATE = 1e-4
RMS_RHO = 0.9                             # Keras' default; torch's own default (0.99) is overridden
RMS_EPSILON = 1e-7
PARAMETERS = (sum(KERNEL * KERNEL * i * o + o for i, o in zip((1,) + CONV_FILTERS[:-1], CONV_FILTERS, strict=True))
              + FLAT * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES)
assert PARAMETERS == 562_228

# precision axis → (parameter dtype, compute dtype), for the APIs without a Keras dtype policy.
PRECISION_DTYPES = {
    "float32": ("float32", "float32"),
    "bfloat16": ("bfloat16", "bfloat16"),
    "mixed_float16": ("float32", "float16"),
    "mixed_bfloat16": ("float32", "bfloat16"),
}


class TrainingArrays(Protocol):
    """What a training feed reads (keras_api/feeds.py training_data): a CnnData, or a user
    workload's arrays (apis/user_common.py)."""

    @property
    def x_train(self) -> np.ndarray: ...
    @property
    def y_train(self) -> np.ndarray: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def steps_per_epoch(self) -> int: ...


@dataclass(frozen=True)
class CnnData:
    """The training and held-out arrays (NHWC float32 in [0, 1], int32 labels)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    batch_size: int
    samples: int                          # options.samples: the epoch the study talks about

    @property
    def steps_per_epoch(self) -> int:
        """Steps of one pass over the training arrays (what fit() and the loops iterate)."""
        return len(self.y_train) // self.batch_size

    @property
    def epoch_steps(self) -> int:
        """Steps of the nominal epoch (`samples`), the same for every steps_per_execution."""
        return self.samples // self.batch_size

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for array in (self.x_train, self.y_train, self.x_test, self.y_test):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]


def make_data(spec: CellSpec) -> CnnData:
    """Learnable synthetic images: each class is a fixed smooth prototype pattern, each sample its
    class's prototype at a random brightness plus pixel noise. The arrays depend on the seed and
    `samples` only (not on batch size), generated in float32 so that building them does not
    inflate the process's peak RSS. The training set is then trimmed to whole batches (times
    steps_per_execution) so every step, and every Keras call, sees a full batch and compiled
    functions never see a second shape; epoch figures still refer to `samples`."""
    samples = int(spec.options["samples"])
    whole = spec.batch_size * max(1, spec.steps_per_execution)
    kept = (samples // whole) * whole
    if kept == 0:
        raise ValueError(f"options.samples = {samples} is less than one call "
                         f"(batch_size × steps_per_execution = {whole})")
    # MNIST's 60 000 / 10 000 split, in whole evaluation batches, at least two of them.
    held_out = max(2, min(samples // 6, 10_000) // EVAL_BATCH) * EVAL_BATCH
    rng = np.random.default_rng(spec.seed)
    coarse = rng.uniform(0.0, 1.0, size=(CLASSES, 7, 7)).astype(np.float32)
    prototypes = np.kron(coarse, np.ones((4, 4), np.float32))        # 7×7 blocks → 28×28

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, CLASSES, size=n).astype(np.int32)
        images = prototypes[labels]
        for start in range(0, n, 4096):             # in chunks: temporaries stay small
            chunk = images[start:start + 4096]
            chunk *= rng.uniform(0.5, 1.0, size=(len(chunk), 1, 1)).astype(np.float32)
            noise = rng.standard_normal(size=chunk.shape, dtype=np.float32)
            noise *= NOISE
            chunk += noise
        np.clip(images, 0.0, 1.0, out=images)
        return images[..., None], labels

    x_train, y_train = draw(samples)
    x_test, y_test = draw(held_out)
    return CnnData(x_train[:kept], y_train[:kept], x_test, y_test, spec.batch_size, samples)


def initial_weights(seed: int) -> list[np.ndarray]:
    """Glorot-uniform kernels and zero biases (Keras' defaults), in Keras' layout and order:
    conv kernels (kh, kw, in, out), dense kernels (in, out), each followed by its bias."""
    rng = np.random.default_rng([seed, 1])
    shapes: list[tuple[int, ...]] = []
    for fan_in, filters in zip((1,) + CONV_FILTERS[:-1], CONV_FILTERS, strict=True):
        shapes.append((KERNEL, KERNEL, fan_in, filters))
    shapes += [(FLAT, HIDDEN), (HIDDEN, CLASSES)]
    weights = []
    for shape in shapes:
        receptive = int(np.prod(shape[:-2])) if len(shape) == 4 else 1
        limit = np.sqrt(6.0 / (receptive * (shape[-2] + shape[-1])))
        weights.append(rng.uniform(-limit, limit, size=shape).astype(np.float32))
        weights.append(np.zeros(shape[-1], np.float32))
    return weights


def weights_fingerprint(weights: list[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for array in weights:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def epoch_orders(samples: int, batch_size: int, seed: int) -> Iterator[np.ndarray]:
    """Endless epochs of sample indices, each a (steps, batch_size) array: a fresh permutation
    every epoch, only whole batches. The APIs whose data sits on the device copy one epoch's
    array there at once and index per step on the device: no step waits for a copy."""
    epoch = 0
    steps = samples // batch_size
    while True:
        order = np.random.default_rng([seed, 2, epoch]).permutation(samples)
        yield order[:steps * batch_size].reshape(steps, batch_size)
        epoch += 1


def batch_indices(samples: int, batch_size: int, seed: int) -> Iterator[np.ndarray]:
    """Endless batches of sample indices in epoch_orders' order (manual shuffling for the APIs
    that own their loop)."""
    for order in epoch_orders(samples, batch_size, seed):
        yield from order


def device_batches(samples: int, batch_size: int, seed: int,
                   to_device: Callable[[np.ndarray], Any]) -> Iterator[Any]:
    """Endless per-step index arrays on the device: `to_device` moves one epoch's (steps,
    batch) array there in one copy and returns its rows."""
    for order in epoch_orders(samples, batch_size, seed):
        yield from to_device(order)


def epoch_estimate(clock: StepClock, steps_per_call: int, data: CnnData) -> float:
    """Seconds one epoch of `samples` takes at the median timed step: median call time / steps
    per call × steps per epoch (the study's "time per epoch", without running a whole epoch in
    every cell; a summary in the worker, but of the one figure the host cannot rebuild)."""
    per_step = statistics.median(clock.timed_s) / (steps_per_call * clock.calls_per_sample)
    return per_step * data.epoch_steps


EPOCH_S_METHOD = "median timed step × steps_per_epoch (estimated, not a measured epoch)"


def stepped_drive(step: Callable[[], Any], extra: dict[str, Any],
                  data: CnnData) -> Callable[[StepClock], None]:
    """The worker's own step loop (run_loop), plus the epoch estimate from the clock it filled:
    for the APIs whose training loop is a plain step function."""

    def drive(clock: StepClock) -> None:
        run_loop(Bench(items_per_step=0, step=step, extra=extra), clock)
        extra["epoch_s"] = epoch_estimate(clock, 1, data)

    return drive


def base_extra(data: CnnData, weights: list[np.ndarray], parameters: int,
               initial: dict[str, Any]) -> dict[str, Any]:
    """Bench.extra every API reports; `parameters` is counted by the framework (checked against
    PARAMETERS by the tests), epoch_s is filled in once the timed loop has run."""
    return {
        "samples": data.samples,
        "trained_samples_per_epoch": int(len(data.y_train)),
        "held_out_samples": int(len(data.y_test)),
        "steps_per_epoch": data.epoch_steps,
        "parameters": int(parameters),
        **initial,
        "epoch_s": None,
        "epoch_s_method": EPOCH_S_METHOD,
        "data_sha256": data.fingerprint(),
        "init_sha256": weights_fingerprint(weights),
    }


def initial_extra(logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The initial model on the probe batch: its loss, and the first two samples' logits (at
    Glorot scale the loss is close to ln 10 for any weights; the logits tell layouts apart)."""
    return {"initial_loss": cross_entropy(logits, labels),
            "initial_logits_head": np.asarray(logits[:2], np.float64).round(7).tolist()}


def answer_fields(spec: CellSpec, initial: dict[str, Any], native_loop: bool) -> dict[str, Any]:
    """The CNN's answer (Bench fields): the initial model on the probe batch, its loss and first
    logits (the same weights and batch in every API), and the first training step's loss where
    every API sees the same first batch: the native loops, which share batch_indices' order
    unless a pipeline shuffles (data = "dataset"); Keras fit shuffles by its own order."""
    def answer() -> dict[str, Any]:
        return {"initial_loss": initial["initial_loss"],
                "initial_logits": answers.head(initial["initial_logits_head"])}

    return {"answer": answer, "first_loss_in_answer": native_loop and spec.data != "dataset"}


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(np.asarray(logits, np.float32), axis=-1) == labels))


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean sparse cross-entropy on logits, in float64 NumPy: one reference every API's initial
    loss is computed with, so that a difference between APIs is a difference in the forward pass."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probs[np.arange(len(labels)), labels]))


def probe(data: CnnData) -> tuple[np.ndarray, np.ndarray]:
    """A fixed batch (the first held-out samples) on which every API reports the loss of its
    initial weights before training: the cross-API same-seed check."""
    return data.x_test[:EVAL_BATCH], data.y_test[:EVAL_BATCH]


def evaluation(logits_fn: Callable[[np.ndarray], np.ndarray], data: CnnData,
               batch: int = EVAL_BATCH) -> dict[str, Any]:
    """Accuracy and loss on the held-out split, predicted `batch` samples at a time by the API's
    forward pass (the split is whole batches, so a compiled forward pass sees one shape)."""
    logits = np.concatenate([np.asarray(logits_fn(data.x_test[i:i + batch]), np.float32)
                             for i in range(0, len(data.y_test), batch)])
    return {"accuracy": accuracy(logits, data.y_test),
            "held_out_loss": cross_entropy(logits, data.y_test)}


PREDICT_TIMING = ("one forward pass over a batch of held-out-style images (the first batch_size "
                  "training images, on the device, made once)")


def predict_batch(spec: CellSpec, data: CnnData) -> np.ndarray:
    """predict's batch: the first batch_size training images (NHWC float32)."""
    return data.x_train[:spec.batch_size]


def predict_answer(logits: Any) -> dict[str, Any]:
    """predict's answer: the norms of the batch's logits and its first ones."""
    return {**answers.output(np.asarray(logits, np.float32)), "logits": answers.head(logits)}


def predict_extra(data: CnnData, weights: list[np.ndarray], parameters: int) -> dict[str, Any]:
    return {"parameters": int(parameters), "data_sha256": data.fingerprint(),
            "init_sha256": weights_fingerprint(weights)}
