"""The keras-hub workloads (BERT, SAM, Stable Diffusion, Gemma, Mistral), written once for the
Keras 3 modules (keras_api/, keras-hub) and the Keras 2 modules (tf_keras_api/, keras-nlp /
keras-cv 0.8), which inject their library's classes:

configs.py   the models' configurations by size (full = the study's presets, random weights)
inputs.py    seeded token ids, images, prompts and weights; in-memory tokenizers
models.py    building a model from a local preset or a configuration
benches.py   one batch through the train or predict function per call, for both generations
bert.py, sam.py, stable_diffusion.py, causal_lm.py   each workload's recipe

Nothing here downloads anything. Importing a module costs only the standard library and NumPy.
"""
