"""Expected peak device memory of every full-size row of the Keras table's HF PyTorch columns
(the hf api: Hugging Face's model code on native PyTorch), without a GPU.

    <hf-torch environment's python> benchmarks/peak_memory_hf.py [--rows bert_fit gemma_fit ...]
                                                                 [--image-size 512] [--size full]

How: the models are built and run under torch's FakeTensorMode (tensors with shapes and dtypes but
no storage: nothing of Gemma 7B's 17 GB is ever allocated) and torch's MemTracker
(torch.distributed._tools.mem_tracker) adds up what would be live — parameters, buffers,
gradients, optimizer states, activations, temporaries — and reports the peak. The same models,
configurations, batch sizes, sequence lengths and dtypes as the worker's hf modules
(runner/worker/apis/hf_api/) and matrix.toml's rows (float32; Gemma and Mistral bfloat16), the
steps as benchmarks/peak_memory.py plans the keras-hub ones:

- fit: one training step, forward, backward and the optimizer's step (AdamW / Adam; Gemma and
  Mistral LoRA rank 4 through peft at 128 tokens; SAM and Stable Diffusion their image encoders).
- predict: the forward pass with every weight of the task resident. Stable Diffusion: one
  denoising step of the transformer at batch 2 × b (classifier-free guidance) and the VAE decode
  at batch b, with both CLIP encoders, the transformer and the VAE resident.
- generate: the forward pass over the whole 50-token sequence with its key/value cache (the
  prefill's shape, the largest call of the loop) and every weight resident.

The fake tensors live on the CPU device (a CPU build of torch cannot fake CUDA ones), so kernels
pick their CPU paths (scaled-dot-product attention's CPU flash kernel keeps no attention matrix,
as the GPU's does not); the caching allocator's rounding and cuBLAS/cuDNN workspaces are not
counted. Read the figures as estimates to ±25 %, as those of benchmarks/peak_memory.py. The script
measures and prints; it asserts nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peak_memory import ROWS, arguments, print_plans  # noqa: E402  (the same rows and lines)

LM_SEQUENCE, LM_MAX_LENGTH, LORA_RANK, BERT_SEQUENCE = 128, 50, 4, 512


def tracked(step, *owners) -> dict[str, float]:
    """The peak of `step()` (run twice: the optimizer's states exist from the first step on, as
    in the worker's timed steps) by MemTracker's categories, in bytes."""
    tracker = tracker_class()()
    tracker.track_external(*owners)
    with tracker:
        step()
        tracker.reset_mod_stats()
        step()
    snapshot = next(iter(tracker.get_tracker_snapshot("peak").values()))
    return {str(getattr(k, "value", k)).lower(): float(v) for k, v in snapshot.items()}


def tracker_class():
    """MemTracker, except that it hooks the gradients of modules whose parameters all train:
    it would hook every parameter's, which a frozen one (LoRA's base weights) refuses. Frozen
    modules' gradients do not exist; the LoRA weights' are counted among the temporaries."""
    from torch.distributed._tools.mem_tracker import MemTracker

    class Tracker(MemTracker):
        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            trains = all(p.requires_grad for p in module.parameters())
            return super()._track_module_params_and_buffers(module, install_grad_hooks and trains)

    return Tracker


def fit_plan(model, trained, loss_of, optimizer) -> dict[str, float]:
    def step():
        loss_of().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return tracked(step, model, optimizer)


def forward_plan(model, forward) -> dict[str, float]:
    import torch

    def step():
        with torch.inference_mode():
            forward()

    return tracked(step, model)


def row_plan(name: str, size: str, side: int) -> dict[str, float]:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    workload, task, batch, policy = ROWS[name]
    dtype = torch.bfloat16 if policy == "bfloat16" else torch.float32
    with FakeTensorMode():
        if workload in ("gemma", "mistral"):
            return causal_lm(workload, task, batch, size, dtype)
        if workload == "bert":
            return bert(task, batch, size)
        if workload == "sam":
            return sam(task, batch, size)
        return stable_diffusion(task, batch, size, side)


def mse_fit(encoder, images, dtype):
    import torch

    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3, eps=1e-7)

    def loss_of():
        out = encoder(images)
        out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
        return torch.nn.functional.mse_loss(out.float(), torch.zeros_like(out, dtype=torch.float32))

    return fit_plan(encoder, None, loss_of, optimizer)


def bert(task: str, batch: int, size: str) -> dict[str, float]:
    import torch
    from transformers import BertForSequenceClassification

    from runner.worker.apis.hf_api import bert as module
    from runner.worker.apis.kerashub.configs import BERT, config

    cfg = config(BERT, size)
    model = BertForSequenceClassification(module.hf_config(cfg))
    length = min(BERT_SEQUENCE, cfg["max_sequence_length"])
    ids = torch.randint(3, cfg["vocabulary_size"], (batch, length))
    if task == "predict":
        return forward_plan(model.eval(), lambda: model(input_ids=ids).logits)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.004, eps=1e-7)
    labels = torch.zeros(batch, dtype=torch.int64)
    return fit_plan(model.train(), None, lambda: torch.nn.functional.cross_entropy(
        model(input_ids=ids).logits, labels), optimizer)


def sam(task: str, batch: int, size: str) -> dict[str, float]:
    import torch
    from transformers import SamModel

    from runner.worker.apis.hf_api import sam as module
    from runner.worker.apis.kerashub.configs import SAM, config

    cfg = config(SAM, size)
    model, side = SamModel(module.hf_config(cfg)), cfg["image_size"]
    images = torch.zeros(batch, 3, side, side)
    if task == "fit":
        return mse_fit(model.vision_encoder.train(), images, torch.float32)
    points, labels = torch.zeros(batch, 1, 1, 2), torch.ones(batch, 1, 1, dtype=torch.int64)
    return forward_plan(model.eval(), lambda: model(pixel_values=images, input_points=points,
                                                    input_labels=labels, multimask_output=True))


def stable_diffusion(task: str, batch: int, size: str, side: int) -> dict[str, float]:
    import torch

    from runner.worker.apis.hf_api import stable_diffusion as module
    from runner.worker.apis.kerashub.configs import SD3, config

    cfg = config(SD3, size)
    # The pipeline's parts (its scheduler computes its sigmas from values, which fake tensors
    # do not have).
    transformer, vae = module.transformer(cfg, side), module.vae(cfg, side)
    if task == "fit":
        return mse_fit(vae.encoder.train(), torch.zeros(batch, 3, side, side), torch.float32)
    length = cfg["clip_l"]["max_sequence_length"]
    latent = side // 8
    width = cfg["clip_l"]["hidden_dim"] + cfg["clip_g"]["hidden_dim"]

    def denoise():
        transformer(hidden_states=torch.zeros(2 * batch, 16, latent, latent),
                         encoder_hidden_states=torch.zeros(2 * batch, 2 * length,
                                                           module.CONTEXT_FEATURES),
                         pooled_projections=torch.zeros(2 * batch, width),
                         timestep=torch.zeros(2 * batch))

    def decode():
        vae.decode(torch.zeros(batch, 16, latent, latent))

    owners = [transformer, vae, module.clip(cfg["clip_l"]), module.clip(cfg["clip_g"])]
    denoising, decoding = (tracked(lambda f=f: no_grad(f), *owners) for f in (denoise, decode))
    return {"denoise_step_total": denoising["total"], "decode_total": decoding["total"],
            "parameter": denoising.get("parameter", 0.0),
            "total": max(denoising["total"], decoding["total"])}


def no_grad(step) -> None:
    import torch

    with torch.inference_mode():
        step()


def causal_lm(workload: str, task: str, batch: int, size: str, dtype) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM

    from runner.worker.apis.hf_api import gemma, mistral
    from runner.worker.apis.kerashub.configs import GEMMA, MISTRAL, config

    module, table = (gemma, GEMMA) if workload == "gemma" else (mistral, MISTRAL)
    cfg = config(table, size)
    model = AutoModelForCausalLM.from_config(module.hf_config(cfg), dtype=dtype)
    length = LM_SEQUENCE if task == "fit" else LM_MAX_LENGTH
    ids = torch.randint(3, cfg["vocabulary_size"], (batch, length))
    if task == "generate":
        return forward_plan(model.eval(), lambda: model(input_ids=ids, use_cache=True).logits)
    trained = lora(model, LORA_RANK, dtype)
    optimizer = torch.optim.AdamW(trained, lr=5e-5, weight_decay=0.01, eps=1e-7)
    labels = torch.zeros(batch * length, dtype=torch.int64)
    return fit_plan(model.train(), trained, lambda: torch.nn.functional.cross_entropy(
        model(input_ids=ids).logits.float().flatten(0, 1), labels), optimizer)


def lora(model, rank: int, dtype) -> list:
    """LoRA of the given rank on the query and value projections, frozen base weights: what peft
    adds (peft itself casts its adapters in place, which fake tensors cannot undergo), as forward
    hooks adding x·Aᵀ·Bᵀ to each projection's output. Returns the trained parameters."""
    import torch

    model.requires_grad_(False)
    trained = []
    for name, module in model.named_modules():
        if name.endswith(("q_proj", "v_proj")):
            module.lora_a = torch.nn.Parameter(torch.zeros(rank, module.in_features, dtype=dtype))
            module.lora_b = torch.nn.Parameter(torch.zeros(module.out_features, rank, dtype=dtype))
            module.register_forward_hook(
                lambda m, args, out: out + (args[0] @ m.lora_a.T) @ m.lora_b.T)
            trained += [module.lora_a, module.lora_b]
    return trained


def main() -> None:
    args = arguments(__doc__)
    print_plans(args.rows, lambda name: row_plan(name, args.size, args.image_size), "total")


if __name__ == "__main__":
    main()
