"""SegmentAnything (sam_huge_sa1b architecture: ViT-H image encoder), written once for both Keras
generations: keras_api/sam.py builds keras-hub's model (Keras 3), tf_keras_api/sam.py keras-cv
0.8's (Keras 2), from the same configuration; the inputs and steps are the same.

predict: one batch of images with one point prompt each through the predict function.
fit: the Keras 3 benchmark study's step (its sam/keras/fit.py compiles SAM's backbone alone with
MSE and Adam against random 64×64×256 features): the image encoder regresses fixed random
targets of its output shape, one batch per train function call (keras-hub raises
NotImplementedError for SAM's own fit). The targets carry no meaning.
"""

from __future__ import annotations

from typing import Any

from ...bench import Bench
from ...protocol import CellSpec
from .. import KerasFramework
from .benches import encoder_fit_bench, jit_in_effect, predict_bench
from .inputs import sam_inputs, seed_weights

SAM_FIT_DOC = ("the Keras 3 benchmark study's SegmentAnything training step: the image encoder "
               "(SAM's ViT backbone) alone regresses fixed random targets of its output shape "
               "(the image embeddings, side/16 × side/16 × 256) from images, MSE, Adam, one batch "
               "per train_on_batch (keras-hub and keras-cv have no fit for SAM); the prompt "
               "encoder and mask decoder are not part of the step")


def sam_bench(spec: CellSpec, fw: KerasFramework, model: Any, *, image_encoder: Any,
              prompt_encoder: Any, preset: str | None) -> Bench:
    """`model`: the whole SAM (image encoder, prompt encoder, mask decoder) without a
    preprocessor; `preset`: the folder its weights came from, if any."""
    keras, batch = fw.keras, spec.batch_size
    side = int(image_encoder.input.shape[1])
    mask_side = 4 * int(prompt_encoder.image_embedding_size[0])
    facts = dict(batch_size=batch, image_size=side, params=model.count_params(),
                 preset=preset or f"random weights, {spec.size} config")
    seed_weights(model, spec, facts, preset)
    if spec.task == "fit":
        return encoder_fit_bench(keras, image_encoder, side, batch, spec.seed, facts,
                                 fw.jit_compile(), SAM_FIT_DOC)
    x = sam_inputs(spec.seed, batch, side, mask_side)
    # keras-hub's and keras-cv's predict_step mishandle the batch that predict_on_batch hands it
    # (a tuple): predict runs a plain keras.Model over the model's own graph, with every prompt
    # input given explicitly.
    trainer = keras.Model(model.input, model.output, name="sam")
    trainer.compile(jit_compile=fw.jit_compile())
    return predict_bench(trainer, x, batch=batch,
                         effective={"jit_compile": jit_in_effect(trainer)}, extra=facts)
