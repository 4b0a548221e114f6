"""The metadata registry: every key a record's `metadata` dict may hold, with its meaning.

A fact that cannot be read is absent, never a placeholder. Standard library only (the host reads
KEYS to validate and to decide which keys make two runs comparable).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

# key -> (meaning, decides comparability between runs)
KEYS: dict[str, tuple[str, bool]] = {
    "python_version": ("Python version running the worker", True),
    "python_implementation": ("CPython, PyPy, ...", True),
    "python_executable": ("interpreter path inside the environment", False),
    "numpy_version": ("NumPy version", False),
    "framework_name": ("framework under test (torch, jax, tensorflow, numpy, keras)", True),
    "framework_version": ("its version", True),
    "keras_version": ("Keras version (Keras 3 or tf-keras)", True),
    "keras_backend": ("Keras backend in use", True),
    "backend_version": ("version of the framework underneath Keras", True),
    "jax_backend": ("JAX default backend (cpu, gpu)", False),
    "jaxlib_version": ("jaxlib version", True),
    "flax_version": ("Flax version", False),
    "optax_version": ("Optax version", False),
    "tensorflow_version": ("TensorFlow version underneath Keras", True),
    "torch_num_threads": ("torch intra-op threads", False),
    # The hf api (Hugging Face's model code on native torch): the libraries the model code is.
    "transformers_version": ("transformers version (hf api)", True),
    "diffusers_version": ("diffusers version (hf api)", True),
    "peft_version": ("peft version (hf api)", True),
    "accelerate_version": ("accelerate version (hf api)", True),
    "cuda_version": ("CUDA version the framework was built with / loaded", True),
    "cudnn_version": ("cuDNN version the framework reports", True),
    "gpu_name": ("GPU model", True),
    "gpu_uuid": ("GPU UUID", False),
    "gpu_count": ("GPUs visible to the worker", False),
    "driver_version": ("NVIDIA driver version", True),
    "gpu_power_limit_w": ("enforced power limit, W (a lower limit caps clocks)", True),
    "gpu_persistence_mode": ("persistence mode on", False),
    "gpu_mig_mode": ("MIG mode on", True),
    "gpu_ecc_mode": ("ECC on", False),
    "gpu_sm_clock_start_mhz": ("SM clock when the worker started, MHz", False),
    "gpu_mem_clock_start_mhz": ("memory clock when the worker started, MHz", False),
    "host_name": ("host name", False),
    "host_os": ("operating system and kernel", False),
    "host_in_container": ("the worker ran inside a container", False),
    "cpu_model": ("CPU model name", True),
    "cpu_count": ("logical CPUs visible", True),
    "cpu_affinity": ("CPUs the worker may run on", False),
    "mem_total_mb": ("physical memory, MB", False),
    "env_flags": ("framework-relevant environment variables in force (XLA_*, TF_*, PYTORCH_*, ...)", False),
    "image_id": ("Docker image id (host)", True),
    "image_digest": ("Docker repo digest when pushed (host)", True),
    "lock_sha256": ("sha256 of the environment's lock file (host)", True),
    "env_path": ("local virtual environment path (host)", False),
    "stack_builds": ("a derived stack's builds that are no release: a channel's dated build "
                     "(name, version, day) or a local wheel or tree (its content sha256) (host; "
                     "the lock's hash decides comparability)", False),
    "env_source": ("where the environment came from: lock (a local venv built from it), image, "
                   "or existing (an interpreter given as python = ...) (host)", False),
    "flavour": ("cpu or cuda: which lock of the image folder was installed (host)", False),
    "distributions_sha256": ("sha256 of the environment's installed name==version list", True),
    "executor": ("local, docker or ray (host)", False),
    "method_version": ("digest of the worker code this cell runs (clock, protocol, shared "
                       "core, its API's package, its workload's module) and of the timing "
                       "method (host; runner/version.py)", True),
    "runner_version": ("digest of every worker file and the timing method: which runner "
                       "measured (host; runner/version.py; for information)", False),
    "workload_sha256": ("sha256 of a user workload's file and the .py files beside it: its "
                        "code (host)", True),
    "worker_env": ("environment variables the matrix sets for the cell's worker: its "
                   "environment's env and [run] preallocate's switches (host)", True),
    "inherited_env": ("host variables DL_BENCH_INHERIT_ENV passed to the worker, with their "
                      "values (host; absent when it names none)", True),
    # Where the cell ran (host): the machine and the GPU its lane or Ray task was pinned to.
    "node_name": ("host name of the machine that ran the cell (a Ray node's own) (host)", False),
    "node_ip": ("the Ray node's IP address (host)", False),
    "ray_node_id": ("the Ray node's id (host)", False),
    "node_executor": ("what ran the cell on the Ray node: local or docker (host)", False),
    "gpu_index": ("NVML index, on its machine, of the GPU the cell was pinned to (host)", False),
    "gpu_indices": ("NVML indices of every GPU a data-parallel cell held (devices > 1; its "
                    "lane's, or its Ray node's) (host)", False),
    "gpu_locked_clocks": ("the GPU's clocks were locked for the run ([run] lock_clocks): 'tdp' "
                          "(its base clock) or the SM clock in MHz (host)", True),
}

# Prefixes of environment variables that change what a framework does.
FLAG_PREFIXES = ("XLA_", "TF_", "JAX_", "PYTORCH_", "TORCH_", "CUDA_", "NVIDIA_", "KERAS_",
                 "OMP_", "MKL_", "CUBLAS_", "NCCL_")


def base_metadata() -> dict[str, Any]:
    """Facts every worker can read with the standard library (and NumPy)."""
    meta: dict[str, Any] = {
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "host_name": socket.gethostname(),
        "host_os": f"{platform.system()} {platform.release()}",
        "host_in_container": os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"),
        "cpu_count": os.cpu_count(),
        "env_flags": {k: v for k, v in sorted(os.environ.items()) if k.startswith(FLAG_PREFIXES)},
    }
    if hasattr(os, "sched_getaffinity"):
        meta["cpu_affinity"] = len(os.sched_getaffinity(0))
    model = _cpu_model()
    if model:
        meta["cpu_model"] = model
    try:
        meta["mem_total_mb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import numpy

        meta["numpy_version"] = numpy.__version__
    except ImportError:
        pass
    return meta


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def clean(meta: dict[str, Any]) -> dict[str, Any]:
    """Drop unknown (None) values and any key missing from the registry (a bug caught in tests)."""
    unknown = set(meta) - set(KEYS)
    if unknown:
        raise KeyError(f"metadata keys not in the registry: {sorted(unknown)}")
    return {k: v for k, v in meta.items() if v is not None}
