"""Shared pieces of the keras-hub workloads (BERT, SAM, StableDiffusion3, Gemma, Mistral) for the
Keras 3 modules (keras_api/, keras-hub) and the Keras 2 modules (tf_keras_api/, keras-nlp/keras-cv
0.8): model configurations by size, synthetic inputs, in-memory tokenizers, local presets.

Nothing here downloads anything. "full" configurations are identical to the presets the Keras 3
benchmark study used (bert_base_en, sam_huge_sa1b, gemma_7b_en, mistral_7b_en; keras-hub's
stable_diffusion_3_medium in place of keras-cv's Stable Diffusion v1.4) with random weights; "tiny"
ones keep each architecture and shrink every dimension so that the smoke profile and CI run on a
CPU. Importing this module costs only the standard library and NumPy.
"""

from __future__ import annotations

import io
import os
import zlib
from typing import Any

import numpy as np

from ..bench import Bench
from . import answers

# --- configurations ---------------------------------------------------------------------------
# Constructor arguments of the keras-hub classes, per size. "small" sits between the two so that a
# laptop GPU can run something meaningful.

BERT = {
    # bert_base_en: 109,482,240 backbone parameters.
    "full": dict(vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
                 intermediate_dim=3072, max_sequence_length=512),
    "small": dict(vocabulary_size=30522, num_layers=4, num_heads=4, hidden_dim=256,
                  intermediate_dim=1024, max_sequence_length=512),
    "tiny": dict(vocabulary_size=128, num_layers=2, num_heads=2, hidden_dim=16,
                 intermediate_dim=32, max_sequence_length=64),
}

GEMMA = {
    # gemma_7b_en: 8,537,680,896 parameters.
    "full": dict(vocabulary_size=256000, num_layers=28, num_query_heads=16, num_key_value_heads=16,
                 hidden_dim=3072, intermediate_dim=49152, head_dim=256),
    "small": dict(vocabulary_size=32000, num_layers=4, num_query_heads=4, num_key_value_heads=4,
                  hidden_dim=512, intermediate_dim=4096, head_dim=128),
    "tiny": dict(vocabulary_size=256, num_layers=2, num_query_heads=2, num_key_value_heads=1,
                 hidden_dim=16, intermediate_dim=32, head_dim=8),
}

MISTRAL = {
    # mistral_7b_en: 7,241,732,096 parameters.
    "full": dict(vocabulary_size=32000, num_layers=32, num_query_heads=32, num_key_value_heads=8,
                 hidden_dim=4096, intermediate_dim=14336, rope_max_wavelength=10000,
                 layer_norm_epsilon=1e-6, sliding_window=4096),
    "small": dict(vocabulary_size=32000, num_layers=4, num_query_heads=8, num_key_value_heads=2,
                  hidden_dim=512, intermediate_dim=1792, sliding_window=4096),
    "tiny": dict(vocabulary_size=256, num_layers=2, num_query_heads=2, num_key_value_heads=1,
                 hidden_dim=16, intermediate_dim=32, sliding_window=64),
}

SAM = {
    # sam_huge_sa1b (ViT-H image encoder): 641,090,864 parameters. (keras-hub 0.32's preset table
    # swaps the huge and large counts; ViT-H is the 641 M one.)
    "full": dict(
        image_size=1024,
        encoder=dict(hidden_size=1280, num_layers=32, intermediate_dim=5120, num_heads=16,
                     global_attention_layer_indices=[7, 15, 23, 31], patch_size=16,
                     num_output_channels=256, window_size=14),
        prompt=dict(hidden_size=256, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=256, intermediate_dim=2048, num_heads=8,
                     embedding_dim=256, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=256),
    ),
    "small": dict(
        image_size=512,
        encoder=dict(hidden_size=256, num_layers=4, intermediate_dim=1024, num_heads=4,
                     global_attention_layer_indices=[1, 3], patch_size=16,
                     num_output_channels=64, window_size=8),
        prompt=dict(hidden_size=64, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=64, intermediate_dim=256, num_heads=4,
                     embedding_dim=64, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=64),
    ),
    "tiny": dict(
        image_size=64,
        encoder=dict(hidden_size=16, num_layers=2, intermediate_dim=32, num_heads=2,
                     global_attention_layer_indices=[1], patch_size=16,
                     num_output_channels=8, window_size=2),
        prompt=dict(hidden_size=8, mask_in_channels=16),
        decoder=dict(num_layers=2, hidden_size=8, intermediate_dim=16, num_heads=2,
                     embedding_dim=8, num_multimask_outputs=3, iou_head_depth=3,
                     iou_head_hidden_dim=8),
    ),
}

SD3 = {
    # stable_diffusion_3_medium: 2,987,080,931 parameters (CLIP-L + CLIP-G + MMDiT + VAE; no T5).
    "full": dict(
        image_size=1024,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=1536, mmdit_num_layers=24,
                   mmdit_num_heads=24, mmdit_position_size=192, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=49408, embedding_dim=768, hidden_dim=768, num_layers=12,
                    num_heads=12, intermediate_dim=3072, intermediate_activation="quick_gelu",
                    intermediate_output_index=10, max_sequence_length=77),
        clip_g=dict(vocabulary_size=49408, embedding_dim=1280, hidden_dim=1280, num_layers=32,
                    num_heads=20, intermediate_dim=5120, intermediate_activation="gelu",
                    intermediate_output_index=30, max_sequence_length=77),
        vae=dict(encoder_num_filters=[128, 256, 512, 512], encoder_num_blocks=[2, 2, 2, 2],
                 decoder_num_filters=[512, 512, 256, 128], decoder_num_blocks=[3, 3, 3, 3],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
    "small": dict(
        image_size=256,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=256, mmdit_num_layers=4,
                   mmdit_num_heads=4, mmdit_position_size=64, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=49408, embedding_dim=128, hidden_dim=128, num_layers=2,
                    num_heads=2, intermediate_dim=256, intermediate_activation="quick_gelu",
                    intermediate_output_index=0, max_sequence_length=77),
        clip_g=dict(vocabulary_size=49408, embedding_dim=256, hidden_dim=256, num_layers=2,
                    num_heads=4, intermediate_dim=512, intermediate_activation="gelu",
                    intermediate_output_index=0, max_sequence_length=77),
        vae=dict(encoder_num_filters=[32, 64, 64, 64], encoder_num_blocks=[1, 1, 1, 1],
                 decoder_num_filters=[64, 64, 64, 32], decoder_num_blocks=[1, 1, 1, 1],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
    "tiny": dict(
        image_size=64,
        mmdit=dict(mmdit_patch_size=2, mmdit_hidden_dim=16, mmdit_num_layers=2,
                   mmdit_num_heads=2, mmdit_position_size=8, mmdit_qk_norm=None,
                   mmdit_dual_attention_indices=None),
        clip_l=dict(vocabulary_size=64, embedding_dim=8, hidden_dim=8, num_layers=2,
                    num_heads=2, intermediate_dim=16, intermediate_activation="quick_gelu",
                    intermediate_output_index=0, max_sequence_length=8),
        clip_g=dict(vocabulary_size=64, embedding_dim=8, hidden_dim=8, num_layers=2,
                    num_heads=2, intermediate_dim=16, intermediate_activation="gelu",
                    intermediate_output_index=0, max_sequence_length=8),
        # GroupNormalization inside the VAE uses 32 groups: filters stay multiples of 32.
        vae=dict(encoder_num_filters=[32, 32, 32, 32], encoder_num_blocks=[1, 1, 1, 1],
                 decoder_num_filters=[32, 32, 32, 32], decoder_num_blocks=[1, 1, 1, 1],
                 sampler_method="sample", sample_channels=32, scale=1.5305, shift=0.0609),
    ),
}

# Parameter counts of the presets the full configurations mirror (from keras-hub's preset tables
# and the published models); the tests check the full configurations against them.
PRESET_PARAMS = {
    "bert": ("bert_base_en", 109_482_240),
    "sam": ("sam_huge_sa1b", 641_090_864),
    "stable_diffusion": ("stable_diffusion_3_medium", 2_987_080_931),
    "gemma": ("gemma_7b_en", 8_537_680_896),
    "mistral": ("mistral_7b_en", 7_241_732_096),
}

PROMPTS = [
    "the quick brown fox jumps over the lazy dog",
    "keras runs on jax tensorflow and torch",
    "a benchmark measures the time of one training step",
    "the lazy dog sleeps in the warm sun",
]


def config(table: dict[str, Any], size: str) -> dict[str, Any]:
    """A deep copy of one size's configuration (callers may modify it)."""
    import copy

    return copy.deepcopy(table[size])


def local_preset(options: dict[str, Any]) -> str | None:
    """The preset folder named by `options.preset`, or None. Only existing local folders are
    accepted: a keras-hub/Kaggle handle would download weights at run time, which this runner never
    does (mount the folder into the container and give its path instead)."""
    preset = options.get("preset")
    if not preset:
        return None
    path = os.path.expanduser(str(preset))
    if not os.path.isdir(path):
        raise ValueError(
            f"options.preset = {preset!r} is not an existing local folder; this runner never "
            "downloads presets: download the preset yourself and give its folder path")
    return path


# --- synthetic inputs -------------------------------------------------------------------------

def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def token_batch(seed: int, batch: int, length: int, vocab: int, low: int = 3) -> np.ndarray:
    """Random token ids, avoiding the first ids (padding and special tokens in every vocabulary
    used here)."""
    return rng(seed).integers(low, vocab, size=(batch, length), dtype=np.int32)


def bert_inputs(seed: int, batch: int, length: int, vocab: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
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
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else int(np.prod(shape))
        path = getattr(variable, "path", None) or variable.name      # Keras 2: the name
        rng = np.random.default_rng([seed, 3, zlib.crc32(path.encode())])
        drawn = rng.standard_normal(shape, dtype=np.float32)
        drawn *= np.float32(1 / np.sqrt(fan_in))
        variable.assign(drawn)
        del drawn
        counts["redrawn"] += 1
    return counts


def seed_weights(model, spec, facts: dict[str, Any], preset: str | None) -> None:
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
    kwargs = {}
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


# --- benches shared by the Keras 3 and Keras 2 modules -----------------------------------------
# Both Keras generations run one batch through the model's compiled train / predict function per
# call, which is the study's "fit / predict per batch", and return host values (NumPy or Python
# floats), so the device has finished when a call returns. Keras 3 does it with train_on_batch /
# predict_on_batch on tensors already on the device. Keras 2's train_on_batch / predict_on_batch
# would build a tf.data dataset and iterator from the batch on every call (milliseconds of host
# work, plus a device-to-host-to-device round trip of the batch that Keras 3 does not pay): Keras 2
# runs the same compiled functions on one iterator made before the timed calls instead.

FIT_TIMING = ("one train-on-batch call per sample (one batch through the compiled train "
              "function; Keras 3: train_on_batch on tensors already on the device; Keras 2: its "
              "train_function on an iterator made once, prefetching the batch to the device); its "
              "loss is read back to the host, so the device has finished")
PREDICT_TIMING = ("one predict-on-batch call per sample (one batch through the compiled predict "
                  "function; Keras 3: predict_on_batch on tensors already on the device; Keras 2: "
                  "its predict_function on an iterator made once, prefetching the batch to the "
                  "device); outputs copied to the host")
KERAS2_FEED = ("tf.data.Dataset.from_tensors(batch).repeat(), prefetched to the device, one "
               "iterator for every call (train_on_batch would build one per call)")
KERAS3_FEED = "the batch as tensors on the device, made once"


def is_keras2() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS") == "1"


def on_device(data: Any) -> Any:
    """The batch as the backend's tensors, made once before the timed calls. The study fed
    cached tf.data batches whose copies overlap the steps; resending the same host arrays every
    call would time a host-to-device copy (SAM predict at batch 4: ~50 MB) it did not."""
    if data is None:
        return None
    import keras

    convert = keras.ops.convert_to_tensor
    if isinstance(data, dict):
        return {key: convert(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(convert(value) for value in data)
    return convert(data)


def keras2_iterator(*parts: Any) -> Any:
    """One iterator over the batch repeated, prefetched to the device: what Keras 2's
    single_batch_iterator builds per call ((x,), (x, y) or (x, y, sample_weight)), made once."""
    import tensorflow as tf

    data = tuple(part for part in parts if part is not None)
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    dataset = tf.data.Dataset.from_tensors(data).repeat()
    return iter(dataset.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=1)))


def to_host(structure: Any) -> Any:
    """Keras 2's sync_to_numpy_or_python_type: every tensor of the outputs to NumPy."""
    import tensorflow as tf

    return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, structure)


def fit_bench(model, x, y, *, batch: int, sample_weight=None, effective=None, extra=None,
              deterministic: bool = True) -> Bench:
    """One batch through the train function per call. Its answer is the first step's loss on
    the fixed batch, unless the step draws random numbers (dropout: each backend its own), so
    `deterministic` is False."""
    bench = _fit_bench(model, x, y, batch=batch, sample_weight=sample_weight,
                       effective=effective, extra=extra)
    bench.first_loss_in_answer = deterministic
    if not deterministic:
        bench.extra["answer_note"] = ("the step draws dropout masks from each backend's own "
                                      "generator: its first loss is no answer")
    return bench


def _fit_bench(model, x, y, *, batch: int, sample_weight=None, effective=None, extra=None) -> Bench:
    if is_keras2():
        iterator = keras2_iterator(x, y, sample_weight)
        model.make_train_function()

        def step():
            model.reset_metrics()             # train_on_batch(reset_metrics=True), its default
            return to_host(model.train_function(iterator))

        feed = KERAS2_FEED
    else:
        x, y, sample_weight = on_device(x), on_device(y), on_device(sample_weight)

        def step():
            # train_on_batch resets the metrics itself: each call's loss is its batch's.
            return model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)

        feed = KERAS3_FEED
    return Bench(step=step, items_per_step=batch, loss=lambda logs: float(logs["loss"]),
                 returns_to_host=True, timing=FIT_TIMING,
                 effective={**(effective or {}), "feed": feed}, extra=dict(extra or {}))


def predict_bench(model, x, *, batch: int, effective=None, extra=None) -> Bench:
    """One batch through the predict function per call; its answer: the norms of the outputs
    on the fixed batch (one more call after the timed ones)."""
    bench = _predict_bench(model, x, batch=batch, effective=effective, extra=extra)
    bench.answer = lambda: answers.output(bench.step())
    return bench


def _predict_bench(model, x, *, batch: int, effective=None, extra=None) -> Bench:
    if is_keras2():
        iterator = keras2_iterator(x)
        model.make_predict_function()

        def step():
            return to_host(model.predict_function(iterator))

        feed = KERAS2_FEED
    else:
        x = on_device(x)

        def step():
            return model.predict_on_batch(x)

        feed = KERAS3_FEED
    return Bench(step=step, items_per_step=batch, returns_to_host=True, timing=PREDICT_TIMING,
                 effective={**(effective or {}), "feed": feed}, extra=dict(extra or {}))


def jit_in_effect(model) -> object:
    """What model.compile resolved jit_compile to ("auto" becomes True or False)."""
    return getattr(model, "jit_compile", None)


# --- Gemma and Mistral (Keras 3 only) ---------------------------------------------------------

GENERATE_TIMING = ("one model.generate call per sample: the real sampling loop (the model's "
                   "default sampler, extra.sampler: greedy for Gemma, top-k for Mistral) from the "
                   "prompts to max_length tokens, stop_token_ids=None so every call generates the "
                   "same number of tokens; the token ids are copied to the host")


def causal_lm_bench(spec, fw, *, backbone_cls, lm_cls, preprocessor_cls, tokenizer_cls,
                    table: dict[str, Any], special: dict[str, tuple[int, str]]) -> Bench:
    """fit: next-token cross-entropy on random ids with LoRA (rank options.lora_rank) through
    train_on_batch; generate: prompts tokenised by a SentencePiece tokenizer trained in memory,
    then model.generate on the token ids (preprocessor=None) up to options.max_length."""
    keras, batch, options = fw.keras, spec.batch_size, spec.options
    preset = local_preset(options)
    backbone = backbone_cls.from_preset(preset) if preset else backbone_cls(**config(table, spec.size))
    facts: dict[str, Any] = dict(batch_size=batch, preset=preset or f"random weights, {spec.size} config",
                                 params=backbone.count_params())
    if spec.task == "fit":
        rank = int(options.get("lora_rank", 4))
        if rank:
            backbone.enable_lora(rank=rank)
        model = lm_cls(backbone=backbone, preprocessor=None)
        seed_weights(model, spec, facts, preset)
        optimizer = keras.optimizers.AdamW(learning_rate=5e-5, weight_decay=0.01)
        # As in keras-hub's LoRA fine-tuning guide: no weight decay on biases and norm scales.
        optimizer.exclude_from_weight_decay(var_names=["bias", "scale"])
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[], jit_compile=fw.jit_compile())
        length = int(options["sequence_length"])
        x, y, weights = causal_lm_inputs(spec.seed, batch, length, backbone.vocabulary_size)
        facts.update(sequence_length=length, lora_rank=rank,
                     trainable_params=sum(int(np.prod(v.shape)) for v in model.trainable_weights))
        return fit_bench(model, x, y, batch=batch, sample_weight=weights,
                         effective={"jit_compile": jit_in_effect(model), "lora_rank": rank},
                         extra=facts)

    max_length = int(options["max_length"])
    tokenizer = tokenizer_cls(proto=sentencepiece_proto(special))
    preprocessor = preprocessor_cls(tokenizer=tokenizer, sequence_length=max_length)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(batch)]
    # Tokenised once, outside the timed calls; generate then runs on token ids with
    # preprocessor=None, which is why stop_token_ids must be None (no end token is known).
    inputs = {k: np.asarray(keras.ops.convert_to_numpy(v))
              for k, v in preprocessor.generate_preprocess(prompts, sequence_length=max_length).items()}
    model = lm_cls(backbone=backbone, preprocessor=None)
    seed_weights(model, spec, facts, preset)
    model.compile(jit_compile=fw.jit_compile())
    new_tokens = int(batch * max_length - inputs["padding_mask"].astype(bool).sum())
    facts.update(max_length=max_length, prompt_tokens=int(inputs["padding_mask"].astype(bool).sum()),
                 new_tokens_per_call=new_tokens, tokenizer_vocabulary=tokenizer.vocabulary_size(),
                 sampler=type(model.sampler).__name__ if hasattr(model, "sampler") else None)
    bench = Bench(items_per_step=batch, timing=GENERATE_TIMING, returns_to_host=True,
                  effective={"jit_compile": jit_in_effect(model)}, extra=facts)
    durations: list[float] = []

    def step():
        import time

        started = time.perf_counter()
        out = model.generate(dict(inputs), stop_token_ids=None)
        ids = np.asarray(keras.ops.convert_to_numpy(out["token_ids"]))
        durations.append(time.perf_counter() - started)
        facts["generated_length"] = int(ids.shape[1])
        return ids

    def evaluate() -> dict[str, Any]:
        # Tokens per second over the timed calls (the first call, which compiles, is excluded).
        timed = durations[spec.warmup_steps:] or durations
        return {"tokens_per_s": new_tokens * len(timed) / sum(timed)}

    def answer() -> dict[str, Any]:
        """The next-token logits after each prompt (a forward pass), and the first tokens
        generated where decoding is greedy: a sampler draws from each backend's own generator."""
        starts = inputs["padding_mask"].astype(bool).sum(axis=1)
        logits = model(dict(inputs))
        last = keras.ops.take_along_axis(
            logits, keras.ops.convert_to_tensor(starts.astype("int32") - 1)[:, None, None], axis=1)
        out = {"next_token_logits": answers.output(keras.ops.convert_to_numpy(
            keras.ops.cast(last, "float32")))["output"]}
        if facts["sampler"] == "GreedySampler":
            out |= answers.tokens(step(), [int(s) for s in starts])
        return out

    bench.step, bench.evaluate, bench.answer = step, evaluate, answer
    return bench


# --- SegmentAnything --------------------------------------------------------------------------

SAM_FIT_DOC = ("the Keras 3 benchmark study's SegmentAnything training step: the image encoder "
               "(SAM's ViT backbone) alone regresses fixed random targets of its output shape "
               "(the image embeddings, side/16 × side/16 × 256) from images, MSE, Adam, one batch "
               "per train_on_batch (keras-hub and keras-cv have no fit for SAM); the prompt "
               "encoder and mask decoder are not part of the step")


# --- StableDiffusion --------------------------------------------------------------------------

SD_PREDICT_TIMING = ("one text-to-image generate call of num_steps denoising steps (text encoders, "
                     "the denoising loop with classifier-free guidance, VAE decode; images copied "
                     "to the host) per timed call; a sample is the call time / num_steps, i.e. "
                     "time per denoising step as in the study; items are images (batch_size per "
                     "call, so batch_size / num_steps per step)")


def images_per_step(batch: int, num_steps: int) -> float:
    """A Stable Diffusion step is one denoising step: a call of num_steps of them makes `batch`
    images, so items/s is images/s and energy per item is energy per image."""
    return batch / num_steps
SD_FIT_DOC = ("the Keras 3 benchmark study's Stable Diffusion training step: the VAE image "
              "encoder (up to its latent moments, before sampling) regresses fixed random "
              "targets of its output shape from images of image_size, MSE, Adam, one batch per "
              "train_on_batch (keras-hub and keras-cv have no fit for Stable Diffusion)")


def check_sd3_side(side: int, cfg: dict[str, Any]) -> None:
    """An image side SD3 can take: the VAE halves it three times and the MMDiT takes 2×2 patches
    of the latent, up to its position table."""
    patches = side // 16
    if side % 16 or patches > cfg["mmdit"]["mmdit_position_size"]:
        raise ValueError(f"options.image_size = {side}: StableDiffusion3 needs a multiple of 16 "
                         f"up to {16 * cfg['mmdit']['mmdit_position_size']} at this size")


def encoder_fit_bench(keras, encoder, side: int, batch: int, seed: int, facts: dict[str, Any],
                      jit_compile, doc: str) -> Bench:
    """The study's SAM and SD fit: an image encoder trained alone on images of side × side,
    MSE against fixed random targets of its output's shape, Adam."""
    images = keras.Input((side, side, 3))
    trainer = keras.Model(images, encoder(images), name="sd_image_encoder_trainer")
    out_shape = tuple(int(d) for d in trainer.output_shape[1:])
    r = rng(seed + 5)
    x = r.uniform(-1.0, 1.0, (batch, side, side, 3)).astype(np.float32)
    y = r.standard_normal((batch, *out_shape)).astype(np.float32)
    trainer.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.MeanSquaredError(),
                    jit_compile=jit_compile)
    facts.update(training_step=doc, trained_params=trainer.count_params(),
                 target_shape=list(out_shape))
    return fit_bench(trainer, x, y, batch=batch,
                     effective={"jit_compile": jit_in_effect(trainer), "image_size": side},
                     extra=facts)


def import_keras2(name: str):
    """keras_nlp / keras_cv for the Keras 2 column, with a clear error outside the environment
    that carries them (images/keras2-tf215; the current tf-keras image has neither)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise RuntimeError(
            f"{name} is not installed here: the Keras 2 keras-hub cells run in the keras2-tf215 "
            f"image (TensorFlow 2.15, keras-nlp/keras-cv 0.8) ({exc})") from exc


# --- keras-hub backbones from the configurations (Keras 3) ------------------------------------

def keras_hub_backbone(keras_hub, workload: str, size: str, image_size: int | None = None):
    """The random-weight keras-hub backbone of `workload` at `size` (the tests build the full
    ones under jax.eval_shape to count parameters without allocating them); Stable Diffusion
    at `image_size` when given (parameter counts do not depend on it)."""
    models = keras_hub.models
    if workload == "bert":
        return models.BertBackbone(**config(BERT, size))
    if workload == "gemma":
        return models.GemmaBackbone(**config(GEMMA, size))
    if workload == "mistral":
        return models.MistralBackbone(**config(MISTRAL, size))
    if workload == "sam":
        cfg = config(SAM, size)
        side = cfg["image_size"]
        embedding = side // cfg["encoder"]["patch_size"]
        return models.SAMBackbone(
            image_encoder=models.ViTDetBackbone(image_shape=(side, side, 3), **cfg["encoder"]),
            prompt_encoder=keras_hub.layers.SAMPromptEncoder(
                image_embedding_size=(embedding, embedding), input_image_size=(side, side),
                **cfg["prompt"]),
            mask_decoder=keras_hub.layers.SAMMaskDecoder(**cfg["decoder"]))
    if workload == "stable_diffusion":
        from keras_hub.src.models.vae.vae_backbone import VAEBackbone  # not exported in 0.32

        cfg = config(SD3, size)
        side = image_size or cfg["image_size"]
        check_sd3_side(side, cfg)
        return models.StableDiffusion3Backbone(
            **cfg["mmdit"], vae=VAEBackbone(**cfg["vae"]),
            clip_l=models.CLIPTextEncoder(**cfg["clip_l"], name="clip_l"),
            clip_g=models.CLIPTextEncoder(**cfg["clip_g"], name="clip_g"),
            image_shape=(side, side, 3))
    raise KeyError(workload)
