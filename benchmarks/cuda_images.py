"""Build the CUDA flavour of each image and check, inside it, that its framework is a CUDA build.

No GPU is needed: what is checked is what the wheels were built for (torch.version.cuda and
cuDNN, the JAX CUDA plugin against jaxlib, TensorFlow's build info), with the container on
`--network none` as the runner starts cell containers. Prints each image's build time and size,
then removes it (a vfs engine keeps a full copy of the file system per layer).

    python benchmarks/cuda_images.py [IMAGE ...]          # default: every image with a CUDA lock

Uses the engine DOCKER_HOST points at and, where no registry is reachable, a local base image
(DL_BENCH_BASE_IMAGE, e.g. the debootstrap base .ci/docker-setup.sh imports).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.environments import LOCKS, images  # noqa: E402
from runner.executors.docker import connect  # noqa: E402
from runner.paths import IMAGES_DIR  # noqa: E402

# What each image must show: a CUDA build of its framework (and keras-hub importing on it).
CHECK = r"""
import importlib, importlib.metadata as md, json, os
facts = {}
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
if version("torch"):
    import torch
    facts.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                 cudnn=torch.backends.cudnn.version(), cuda_build=torch.version.cuda is not None)
if version("jax"):
    import jax, jaxlib
    plugin = version("jax-cuda12-plugin") or version("jax-cuda13-plugin")
    pjrt = version("jax-cuda12-pjrt") or version("jax-cuda13-pjrt")
    facts.update(jax=jax.__version__, jaxlib=jaxlib.__version__, cuda_plugin=plugin,
                 cuda_pjrt=pjrt, cuda_build=plugin is not None and plugin == jaxlib.__version__)
if version("tensorflow"):
    import tensorflow as tf
    info = tf.sysconfig.get_build_info()
    facts.update(tensorflow=tf.__version__, tf_cuda=info.get("cuda_version"),
                 tf_cudnn=info.get("cudnn_version"), cuda_build=bool(info.get("is_cuda_build")))
for name in ("keras_hub", "keras_nlp", "keras_cv", "tf_keras", "keras"):
    if importlib.util.find_spec(name):
        facts[name] = getattr(importlib.import_module(name), "__version__", "?")
facts["nvidia_wheels"] = sorted(d.metadata["Name"] for d in md.distributions()
                                if d.metadata["Name"].lower().startswith("nvidia-"))
print("CHECK " + json.dumps(facts))
"""
BACKENDS = {"torch": "torch", "jax": "jax", "tensorflow": "tensorflow"}


def check(client, tag: str, name: str) -> dict:
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "JAX_PLATFORMS": "cpu"}
    if name in BACKENDS:
        env["KERAS_BACKEND"] = BACKENDS[name]
    if name == "tf-keras":
        env["TF_USE_LEGACY_KERAS"] = "1"
    out = client.containers.run(tag, ["python", "-c", CHECK], network_mode="none", remove=True,
                                environment=env, stdout=True, stderr=True)
    line = [text for text in out.decode(errors="replace").splitlines() if text.startswith("CHECK ")][-1]
    return json.loads(line[len("CHECK "):])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*",
                        default=sorted(p.parent.name for p in IMAGES_DIR.glob(f"*/{LOCKS['cuda']}")))
    parser.add_argument("--keep", action="store_true", help="keep the images afterwards")
    args = parser.parse_args()
    client = connect(timeout=900)   # a vfs engine copies a whole multi-GB file system per container
    failed = 0
    for name in args.images:
        rec = images.recipe(name, "cuda")
        started = time.monotonic()
        free_before = shutil.disk_usage("/").free / 1e9
        print(f"== {name}: building {rec.tag} ({free_before:.0f} GB free)", flush=True)
        try:
            image, _ = images.ensure(client, rec, lambda line: None)
            built_s = time.monotonic() - started
            size_gb = image.attrs["Size"] / 1e9
            facts = check(client, rec.tag, name)
        except Exception as exc:  # one image's failure is reported, the others still run
            print(f"{name}: FAILED after {time.monotonic() - started:.0f} s: {exc}", flush=True)
            failed += 1
            continue
        finally:
            if not args.keep:
                for tag in (rec.tag, rec.alias):
                    try:
                        client.images.remove(tag, force=True)
                    except Exception:
                        pass
                client.api.prune_builds() if hasattr(client.api, "prune_builds") else None
        verdict = "CUDA build" if facts.pop("cuda_build", False) else "NOT a CUDA build"
        print(f"{name}: {verdict}; built in {built_s:.0f} s; image {size_gb:.2f} GB; "
              f"{json.dumps(facts)}", flush=True)
        failed += verdict != "CUDA build"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
