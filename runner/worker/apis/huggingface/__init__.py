"""The recipes the hf api's five modules share (runner/worker/apis/hf_api/): Hugging Face's model
code (transformers, diffusers, peft) on native PyTorch, at the keras-hub cells' sizes, batch
sizes, sequence lengths, precisions and seeded inputs (apis/kerashub/configs.py, inputs.py).

benches.py     precision, tensors, and the fit / predict / image-encoder training benches: one
               batch per call, as the keras-hub cells time it
causal_lm.py   Gemma's and Mistral's LoRA fit (peft) and generate (time to first token included)
weights.py     the keras-hub cells' seeded weights drawn into the Hugging Face models, weight by
               weight, where the two name the same tensors (BERT, Gemma, Mistral)

Models are built from configuration objects in code, with random weights: nothing is downloaded
and no hub name appears anywhere (hf_api/__init__.py sets HF_HUB_OFFLINE before any Hugging Face
library is imported).
"""
