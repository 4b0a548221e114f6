"""What the Docker executor asks the engine for (no engine needed), and the image recipes: the
Dockerfiles, the GPU locks, tags, labels and flavours."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from tests.executors.attempts import attempt_in

from runner.environments import Source, images
from runner.executors.base import Attempt, GpuRequest, Prepared
from runner.paths import IMAGES_DIR, REPO_ROOT

IMAGE_NAMES = sorted(p.parent.name for p in IMAGES_DIR.glob("*/requirements.lock"))
DOCKERFILE = IMAGES_DIR / "Dockerfile"          # the one recipe of every image


@pytest.fixture
def dockerx():
    """runner.executors.docker, the executor."""
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install .[docker])")
    from runner.executors import docker as module

    return module


@pytest.fixture
def containers():
    """runner.executors.containers, whose run options are the docker SDK's types."""
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install .[docker])")
    from runner.executors import containers as module

    return module


def options(containers, tmp_path: Path, gpu_id: str | None = None, **kwargs) -> dict:
    return containers.run_options("dl-bench/numpy:cpu-x", tmp_path, {"KERAS_BACKEND": "jax"},
                               labels={containers.LABEL_RUN: "run-1"}, gpu_id=gpu_id, **kwargs)


def test_gpu_cell_gets_one_gpu_by_id_with_compute_and_utility(containers, tmp_path):
    opts = options(containers, tmp_path, gpu_id="1")
    [request] = opts["device_requests"]
    assert request["DeviceIDs"] == ["1"]
    assert request["Capabilities"] == [["gpu", "compute", "utility"]]
    assert request["Driver"] == "nvidia"
    assert "Count" not in request or not request["Count"]
    assert opts["environment"]["JAX_PLATFORMS"] == "cuda"   # no silent CPU fallback
    assert opts["environment"]["DL_BENCH_GPU_GIVEN"] == "1"  # the worker insists on the GPU


def test_cpu_cell_gets_no_gpu(containers, tmp_path):
    opts = options(containers, tmp_path)
    assert opts["device_requests"] == []
    assert "JAX_PLATFORMS" not in opts["environment"]
    assert "DL_BENCH_GPU_GIVEN" not in opts["environment"]


def test_code_mount_is_read_only_and_only_the_cell_folder_is_writable(containers, tmp_path):
    mounts = {m["Target"]: m for m in options(containers, tmp_path)["mounts"]}
    assert set(mounts) == {"/opt/dl-bench/runner", "/cell"}
    code, cell = mounts["/opt/dl-bench/runner"], mounts["/cell"]
    assert code["ReadOnly"] is True and code["Type"] == "bind"
    assert code["Source"] == str(REPO_ROOT / "runner")
    assert cell["ReadOnly"] is False and cell["Source"] == str(tmp_path)


def test_sandbox_options(containers, tmp_path):
    opts = options(containers, tmp_path)
    assert opts["network_mode"] == "none"
    assert opts["user"] == "1000:1000"
    assert opts["cap_drop"] == ["ALL"]
    assert opts["security_opt"] == ["no-new-privileges"]
    assert opts["init"] is True
    assert opts["shm_size"] == containers.SHM_SIZE
    assert opts["working_dir"] == "/cell"
    assert opts["command"] == ["python", "-P", "-m", "runner.worker", "/cell/spec.json",
                               "/cell/result.json"]
    assert opts["environment"]["PYTHONPATH"] == "/opt/dl-bench"
    assert opts["environment"]["KERAS_BACKEND"] == "jax"
    assert opts["labels"] == {containers.LABEL_RUNNER: "1", containers.LABEL_RUN: "run-1"}
    assert "mem_limit" not in opts


def test_the_root_filesystem_is_read_only_with_a_tmpfs_tmp_and_processes_are_capped(containers,
                                                                                   tmp_path):
    opts = options(containers, tmp_path)
    assert opts["read_only"] is True
    assert opts["environment"]["HOME"] == "/tmp"          # where Keras and the caches write
    assert set(opts["tmpfs"]) == {"/tmp"}
    flags = opts["tmpfs"]["/tmp"].split(",")
    assert "exec" in flags and "noexec" not in flags      # torch.compile loads kernels from /tmp
    assert {"nosuid", "nodev"} <= set(flags)
    assert 1024 <= opts["pids_limit"] <= 65536


def test_a_matrix_env_cannot_replace_the_runners_own_variables(containers, tmp_path):
    env = {"PATH": "/evil", "LD_PRELOAD": "/cell/evil.so", "PYTHONPATH": "/cell",
           "HOME": "/cell", "XLA_FLAGS": "--xla_dump_to=/tmp"}
    opts = containers.run_options("img", tmp_path, env, labels={}, gpu_id=None)
    environment = opts["environment"]
    assert "PATH" not in environment and "LD_PRELOAD" not in environment  # the image's PATH
    assert environment["PYTHONPATH"] == "/opt/dl-bench" and environment["HOME"] == "/tmp"
    assert environment["XLA_FLAGS"] == "--xla_dump_to=/tmp"


def test_ulimits_follow_nvidia_and_can_be_lowered(containers, tmp_path):
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in options(containers, tmp_path)["ulimits"]}
    assert ulimits == {"memlock": (-1, -1), "stack": (67108864, 67108864)}
    capped = containers.host_capped_ulimits()
    assert set(capped) == {"memlock", "stack"}
    for soft, hard in capped.values():
        assert soft == -1 or hard == -1 or soft <= hard


def test_memory_limit_is_passed_without_swap(containers, tmp_path):
    opts = options(containers, tmp_path, mem_limit="2g")
    assert opts["mem_limit"] == opts["memswap_limit"] == "2g"


def cell_attempt(tmp_path: Path, device: str) -> Attempt:
    """The attempt of cell abc's repeat 2 of run r-9, as the pipeline makes it: a GPU request
    unless the cell runs on the CPU."""
    return attempt_in(tmp_path, run_id="r-9", cell_id="abc", repeat=2, device=device,
                      gpu=None if device == "cpu" else GpuRequest())


@pytest.mark.parametrize("device, gpu, expected", [("gpu", True, "3"), ("cpu", True, None),
                                                   ("gpu", False, None)])
def test_gpu_only_when_the_cell_wants_one_and_the_host_has_one(dockerx, containers, tmp_path,
                                                                 device, gpu,
                                                                 expected):
    executor = dockerx.DockerExecutor(gpu_id="3", gpu=gpu)
    opts = executor.options_for(Prepared("numpy"), cell_attempt(tmp_path, device))
    ids = [r["DeviceIDs"] for r in opts["device_requests"]]
    assert ids == ([[expected]] if expected else [])
    assert opts["labels"][containers.LABEL_RUN] == "r-9"
    assert opts["labels"][containers.LABEL_CELL] == "abc-r2"
    assert opts["labels"][containers.LABEL_OWNER].endswith(f":{os.getpid()}")


@pytest.mark.parametrize("device, gpu, expected", [("auto", True, "GPU-lane-2"),
                                                   ("cpu", True, None), ("auto", False, None)])
def test_a_parallel_lane_pins_its_gpu_in_the_device_request(dockerx, tmp_path, device, gpu,
                                                             expected):
    executor = dockerx.DockerExecutor(gpu_id="3", gpu=gpu)
    attempt = cell_attempt(tmp_path, device)
    if attempt.gpu is not None:
        attempt.gpu = GpuRequest("GPU-lane-2")      # the lane's GPU wins over DL_BENCH_GPU's
    opts = executor.options_for(Prepared("numpy"), attempt)
    assert [r["DeviceIDs"] for r in opts["device_requests"]] == ([[expected]] if expected else [])


def test_executor_does_not_touch_the_engine_until_needed(dockerx):
    executor = dockerx.DockerExecutor()     # --dry-run and planning work without an engine
    assert executor._client is None
    executor.close()


# --- recipes ------------------------------------------------------------------------------------

def test_every_environment_image_has_its_locks_and_no_recipe_of_its_own():
    assert {"numpy", "tensorflow", "tf-keras", "jax", "torch", "keras2-tf215"} <= set(IMAGE_NAMES)
    assert not list(IMAGES_DIR.glob("*/Dockerfile")), "one shared recipe: images/Dockerfile"


def test_dockerfile_contract():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG BASE=\S+@sha256:[0-9a-f]{64}$", text, re.M), "base pinned by digest"
    assert "FROM ${BASE}" in text
    assert "--require-hashes" in text and "--no-deps" in text
    assert re.search(r"^USER 1000:1000$", text, re.M), "non-root user"
    assert "LD_LIBRARY_PATH" not in text.replace("No LD_LIBRARY_PATH", "")
    for key in ("image", "lock-sha256", "recipe-sha256", "flavour"):
        assert f"org.dl-bench.{key}=" in text
    assert 'org.dl-bench.image="${IMAGE}"' in text          # the name is a build argument
    assert "ARG LOCK=requirements.lock" in text   # CPU lock by default: CI can build it


@pytest.mark.parametrize("name", [n for n in IMAGE_NAMES if n != "numpy"])
def test_gpu_lock_pins_every_package_with_hashes(name):
    lock = (IMAGES_DIR / name / "requirements-cuda.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+) \\$", lock, re.M)
    assert pins, "no pinned packages"
    entries = re.split(r"\n(?=[A-Za-z])", lock.split("\n", 1)[1] if lock.startswith("#") else lock)
    for entry in entries:
        if entry.strip() and not entry.startswith("#"):
            assert "==" in entry.splitlines()[0] and "--hash=sha256:" in entry, entry[:80]
    nvidia = [p for p, _ in pins if p.startswith("nvidia-") and p != "nvidia-ml-py"]
    assert len(nvidia) >= 8, "CUDA libraries come from pinned nvidia-* wheels"
    assert not any(p.startswith("nvidia-") and "cu13" in p for p, _ in pins), "CUDA 12 only"
    assert any(p == "nvidia-cuda-runtime-cu12" for p, _ in pins)


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_only_one_framework_owns_the_gpu(name):
    lock = (IMAGES_DIR / name / "requirements-cuda.lock").read_text()
    assert not re.search(r"^tensorflow", lock, re.M)


def test_recipe_tags_labels_and_build_args():
    rec = images.recipe("numpy", "cpu", base="local/base:1")
    sha = images.sha256_file(IMAGES_DIR / "numpy" / "requirements.lock")
    assert rec.lock_sha256 == sha
    assert rec.tag == f"dl-bench/numpy:cpu-{sha[:12]}" and rec.alias == "dl-bench/numpy:cpu"
    assert rec.dockerfile == DOCKERFILE
    assert rec.build_args() == {"IMAGE": "numpy", "LOCK": "requirements.lock", "LOCK_SHA256": sha,
                                "RECIPE_SHA256": rec.recipe_sha256, "FLAVOUR": "cpu",
                                "BASE": "local/base:1"}
    assert rec.labels()["org.dl-bench.lock-sha256"] == sha
    assert images.recipe("numpy", "cpu").recipe_sha256 != rec.recipe_sha256  # the base counts
    assert images.recipe("jax", "cpu").recipe_sha256 != images.recipe("numpy", "cpu").recipe_sha256


def test_missing_image_folder_is_one_clear_error():
    with pytest.raises(images.ImageError, match="nope.*missing"):
        images.recipe("nope")


def test_host_gpu_sampling_finds_the_containers_gpu_from_its_device_request(containers):
    attrs = {"HostConfig": {"DeviceRequests": [{"Driver": "nvidia", "DeviceIDs": ["2"]}]}}
    assert containers.options_gpu(attrs) == "2"
    assert containers.options_gpu({"HostConfig": {"DeviceRequests": None}}) is None


def test_host_gpu_sampling_is_absent_without_nvml(containers):
    from runner.machine import hostinfo

    if hostinfo.gpu_found():
        pytest.skip("a GPU machine (see the gpu test below)")
    assert containers.host_gpu_monitor("0") is None


@pytest.mark.gpu
def test_host_gpu_sampling_on_a_gpu(containers, tmp_path):
    from runner.machine import hostinfo

    if not hostinfo.gpu_found():
        pytest.skip("needs an NVIDIA GPU (NVML found none)")
    monitor = containers.host_gpu_monitor("0")
    assert monitor is not None
    time.sleep(0.3)
    containers.save_host_gpu(monitor, tmp_path / "host_gpu.json")
    summary = json.loads((tmp_path / "host_gpu.json").read_text())
    assert summary["window_s"] > 0 and summary["nvml_memory_peak_mb"] is not None


def test_explicit_docker_executor_is_chosen_without_touching_an_engine(dockerx):
    from runner.run.setup import choose_setup

    executor = choose_setup(None, "docker").executor
    assert isinstance(executor, dockerx.DockerExecutor) and executor._client is None


def test_a_prepare_without_engine_fails_the_images_cells_with_the_fix(dockerx, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    prepared = dockerx.DockerExecutor(gpu=False).prepare(Source("numpy"), lambda line: None)
    assert prepared.error and "no Docker engine answers" in prepared.error
    assert "systemctl start docker" in prepared.error


def test_every_image_of_the_canonical_matrix_has_its_locks():
    import tomllib

    matrix = tomllib.loads((REPO_ROOT / "matrix.toml").read_text(encoding="utf-8"))
    needed = {env["image"] for env in matrix["environments"].values()}
    for name in needed:
        assert (IMAGES_DIR / name / "requirements.lock").is_file(), name
        if name != "numpy":
            assert (IMAGES_DIR / name / "requirements-cuda.lock").is_file(), name


def test_a_container_says_its_compilation_caches_are_fresh(containers, tmp_path):
    """A new container's HOME is its own: compile_s is cold there, whatever [run]
    keep_compile_caches asks of the local executor (the worker records compile_cache)."""
    from runner.worker.protocol import COMPILE_CACHE_ENV

    opts = containers.run_options("img", tmp_path, {COMPILE_CACHE_ENV: "kept"}, labels={},
                               gpu_id=None)
    assert opts["environment"][COMPILE_CACHE_ENV] == "fresh"
