"""The keras-hub workloads' seeded inputs: token ids, images and prompts drawn from NumPy's
generator (the same numbers in every environment), the models' weights redrawn the same way, and
the SentencePiece tokenizers Gemma and Mistral generate with, trained in memory. Nothing here
downloads anything. Standard library and NumPy only."""

from __future__ import annotations

import io
import zlib
from typing import Any

import numpy as np

from ...protocol import CellSpec

PROMPTS = [
    "the quick brown fox jumps over the lazy dog",
    "keras runs on jax tensorflow and torch",
    "a benchmark measures the time of one training step",
    "the lazy dog sleeps in the warm sun",
]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def token_batch(seed: int, batch: int, length: int, vocab: int, low: int = 3) -> np.ndarray:
    """Random token ids, avoiding the first ids (padding and special tokens in every vocabulary
    used here)."""
    return rng(seed).integers(low, vocab, size=(batch, length), dtype=np.int32)


def bert_inputs(seed: int, batch: int, length: int,
                vocab: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    x = {"token_ids": token_batch(seed, batch, length, vocab),
         "segment_ids": np.zeros((batch, length), np.int32),
         "padding_mask": np.ones((batch, length), np.int32)}
    y = rng(seed + 1).integers(0, 2, size=(batch,), dtype=np.int32)
    return x, y


def causal_lm_inputs(seed: int, batch: int, length: int, vocab: int):
    """Next-token prediction on random ids: x, y (x shifted by one), sample_weight."""
    ids = token_batch(seed, batch, length + 1, vocab)
    x = {"token_ids": ids[:, :-1], "padding_mask": np.ones((batch, length), np.int32)}
    return x, ids[:, 1:], np.ones((batch, length), np.float32)


def sam_inputs(seed: int, batch: int, image_size: int, mask_size: int) -> dict[str, np.ndarray]:
    """Images with one point prompt each; box and mask prompts are empty, as in keras-hub's own
    placeholders (mask_size = 4 × the image-embedding side)."""
    r = rng(seed)
    return {
        "images": r.uniform(0, 255, (batch, image_size, image_size, 3)).astype(np.float32),
        "points": r.uniform(0, image_size, (batch, 1, 2)).astype(np.float32),
        "labels": np.ones((batch, 1), np.float32),
        "boxes": np.zeros((batch, 0, 2, 2), np.float32),
        "masks": np.zeros((batch, 0, mask_size, mask_size, 1), np.float32),
    }


def seeded_weights(model, seed: int) -> dict[str, int]:
    """Redraw every randomly initialised weight of `model` from NumPy (normal, scaled by
    1/√fan-in, fan-in being the product of all but the last dimension), each from a generator
    seeded by the run's seed and the weight's path, so that the draw does not depend on the
    order a backend lists its weights in (Keras on torch lists a model's sublayers in another
    order than on JAX or TensorFlow); constant weights (zero biases, unit norm scales) are kept.
    Each backend's initialisers draw other numbers from the same seed, and the answers of a
    row's environments can only agree on identical weights. Random weights are still random
    weights: the shapes, hence the work timed, are the configuration's. It runs in setup (never
    timed); host memory holds one weight at a time (twice the largest: Gemma 7B's embedding,
    ~3 GB in float32). Returns the counts."""
    counts = {"redrawn": 0, "kept": 0}
    for variable in model.weights:
        value = np.asarray(variable.numpy())
        flat = value.reshape(-1)
        sample = flat[::max(1, flat.size // 4096)].astype(np.float64) if flat.size else flat
        if value.dtype.kind not in "fV" or flat.size < 2 or np.ptp(sample) == 0:
            counts["kept"] += 1
            continue
        shape = value.shape
        del value, flat
        path = getattr(variable, "path", None) or variable.name      # Keras 2: the name
        drawn = seeded_draw(seed, path, shape)
        variable.assign(drawn)
        del drawn
        counts["redrawn"] += 1
    return counts


def seeded_draw(seed: int, path: str, shape: tuple[int, ...]) -> np.ndarray:
    """The values seeded_weights gives the weight at `path` (its Keras variable path) of this
    shape: normal, scaled by 1/√fan-in. The hf api draws the same numbers for the same weights
    (apis/huggingface/weights.py), so that its answers compare with the Keras cells'."""
    fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else int(np.prod(shape))
    rng = np.random.default_rng([seed, 3, zlib.crc32(path.encode())])
    drawn = rng.standard_normal(shape, dtype=np.float32)
    drawn *= np.float32(1 / np.sqrt(fan_in))
    return drawn


def seed_weights(model: Any, spec: CellSpec, facts: dict[str, Any], preset: str | None) -> None:
    """seeded_weights unless the weights come from a preset (identical files everywhere)."""
    if not preset:
        facts["seeded_weights"] = seeded_weights(model, spec.seed)

# --- tokenizers built in memory ---------------------------------------------------------------

def sentencepiece_proto(special: dict[str, tuple[int, str]], vocab_size: int = 40) -> bytes:
    """A SentencePiece model trained in memory on PROMPTS (~10 ms): enough for a real tokenizer
    object and a real generate loop, without downloading a vocabulary.
    `special` maps pad/unk/bos/eos to (id, piece)."""
    import sentencepiece

    model = io.BytesIO()
    kwargs: dict[str, int | str] = {}
    for role in ("pad", "unk", "bos", "eos"):
        ident, piece = special.get(role, (-1, None))
        kwargs[f"{role}_id"] = ident
        if piece is not None:
            kwargs[f"{role}_piece"] = piece
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(PROMPTS * 4), model_writer=model, vocab_size=vocab_size,
        model_type="WORD", hard_vocab_limit=False, minloglevel=2, **kwargs)
    return model.getvalue()


GEMMA_SPECIAL = {"pad": (0, "<pad>"), "eos": (1, "<eos>"), "bos": (2, "<bos>"), "unk": (3, "<unk>")}
MISTRAL_SPECIAL = {"unk": (0, "<unk>"), "bos": (1, "<s>"), "eos": (2, "</s>")}

