"""Data-parallel cells on the host (runner/run/devices.py, scheduling.Lanes, the executors' GPU
hand-off): a cell with devices = N holds N GPUs of one machine, never a GPU another cell holds,
never more than the run has; a cell that asks for more is planned NA with the reason.

Only the host's GPU list is faked (what NVML would say about an 8-GPU VM); the scheduler, the
plan and the executors' requests are the real ones. The data-parallel workers themselves run in
tests/worker/test_data_parallel.py."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import pytest
from rich.console import Console

from runner import settings
from runner.executors.base import GpuRequest
from runner.executors.containers import run_options
from runner.executors.local import LocalExecutor
from runner.executors.ray import RayExecutor
from runner.environments import Source
from runner.executors.ray_messages import CellRequest
from runner.executors.ray_node import node_attempt
from runner.machine import hostinfo
from runner.machine.hostinfo import Gpu
from runner.paths import REPO_ROOT as REPO
from runner.run import devices, scheduling
from runner.run.cells import gpu_request
from runner.run.setup import choose_setup
from runner.schema import matrix as matrix_mod
from runner.schema.axes import Axes
from tests.executors.attempts import attempt_in

GPUS = [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA A100-SXM4-80GB"} for i in range(8)]
EIGHT_GPUS = {"gpu_count": 8, "gpu_name": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54.15",
              "gpus": GPUS}


@pytest.fixture
def eight_gpu_host(monkeypatch):
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: dict(EIGHT_GPUS))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")   # local executor
    for var in (settings.FLAVOUR, settings.GPU, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


def gpu_lanes(count: int = 8) -> list[scheduling.Lane]:
    return scheduling.gpu_lanes("auto", [Gpu(i, f"GPU-{i}") for i in range(count)], "x")[0]


def test_mixed_1_2_4_device_cells_never_share_a_gpu_nor_exceed_the_host():
    widths = [4, 1, 2, 1, 4, 2, 2, 1, 1, 4, 2, 1, 8, 1, 2, 4]
    entries = [SimpleNamespace(name=f"c{i}", width=w) for i, w in enumerate(widths)]
    held: dict[str, str] = {}              # GPU → the entry holding it
    peak, lock, given = [0], threading.Lock(), {}
    rng = random.Random(7)

    def run_one(entry, lane, show):
        gpus = [gpu.device_id for gpu in lane.gpus]
        with lock:
            assert len(gpus) == entry.width and len(set(gpus)) == entry.width
            clash = {g: held[g] for g in gpus if g in held}
            assert not clash, f"{entry.name} on GPUs another cell holds: {clash}"
            held.update(dict.fromkeys(gpus, entry.name))
            peak[0] = max(peak[0], len(held))
            given[entry.name] = gpus
        time.sleep(rng.uniform(0.005, 0.03))
        with lock:
            for gpu in gpus:
                del held[gpu]
        return gpus

    finished = []
    lanes = scheduling.Lanes(gpu_lanes(), Console(quiet=True))
    lanes.run(entries, scheduling.Policy(label=lambda e: e.name, width=lambda e: e.width),
              run_one=run_one, done=lambda e, result, progress: finished.append(e.name),
              interrupt=lambda: None)
    assert sorted(finished) == sorted(e.name for e in entries)      # every one ran, once
    assert peak[0] <= 8 and peak[0] >= 6                             # busy, never beyond
    assert given["c12"] == [f"GPU-{i}" for i in range(8)]            # 8 devices: the whole host


def test_a_joined_lane_names_every_gpu_and_its_placement():
    lane = scheduling.Lane.join(gpu_lanes()[2:4])
    assert lane.label == "GPU 2+3" and [g.index for g in lane.gpus] == [2, 3]
    assert lane.placement()["gpu_indices"] == [2, 3] and lane.placement()["gpu_index"] == 2
    cell = SimpleNamespace(axes=Axes.defaults(devices=2))
    assert gpu_request(cell, lane) == GpuRequest("GPU-2", ("GPU-3",), count=2)
    assert gpu_request(SimpleNamespace(axes=Axes.defaults(device="cpu", devices=2)), lane) is None


def test_a_cell_wider_than_every_lane_is_a_bug_not_a_hang():
    lanes = scheduling.Lanes(gpu_lanes(2), Console(quiet=True))
    with pytest.raises(RuntimeError, match="wants 4 lanes, the run has 2"):
        lanes.run([SimpleNamespace()], scheduling.Policy(width=lambda e: 4),
                  run_one=lambda e, lane, show: None, done=lambda e, r, p: None,
                  interrupt=lambda: None)


def test_the_executors_hand_a_cell_all_of_its_gpus(tmp_path):
    request = GpuRequest("GPU-2", ("GPU-3",), count=2)
    attempt = attempt_in(tmp_path, gpu=request)
    env = LocalExecutor(gpu=True).runner_env(attempt, "w")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-2,GPU-3"
    options = run_options("img", tmp_path, {}, labels={}, gpu_id=request.visible)
    assert [r["DeviceIDs"] for r in options["device_requests"]] == [["GPU-2", "GPU-3"]]


def test_ray_asks_for_n_gpus_on_one_node_and_the_node_hands_over_all(tmp_path):
    cluster = SimpleNamespace(facts={"gpus": 16, "cpus_per_node": 32})
    assert RayExecutor.resources(cluster, 4) == {"num_gpus": 4, "num_cpus": 1}
    assert RayExecutor.resources(cluster, 1) == {"num_gpus": 1, "num_cpus": 1}
    assert RayExecutor.resources(cluster, 0) == {"num_gpus": 0, "num_cpus": 32}
    request = CellRequest(spec=attempt_in(tmp_path).spec, source=Source("numpy"), locks={},
                          env={}, timeout=5, wants_gpu=True, node_executor="local")
    attempt = node_attempt(request, {"gpu_index": 4, "gpu_indices": [4, 5, 6, 7]}, tmp_path,
                           tmp_path / "log")
    assert attempt.gpu == GpuRequest("4", ("5", "6", "7"), count=4)
    assert attempt.gpu.visible == "4,5,6,7"


MATRIX = """
[environments.torch]
image = "torch"
api = "torch"

[[benchmarks]]
workload = "cnn"
batch_size = 64
devices = [1, 2, 4, 8, 16]
"""


def planned(path, device: str = "auto") -> dict[int, str | None]:
    matrix = matrix_mod.load(path, "full")
    setup = choose_setup(matrix, None)
    cells = [c for c in devices.fit_to_machine(setup, matrix.cells) if c.axes["device"] == device]
    return {c.axes["devices"]: c.not_applicable for c in cells}


def test_more_devices_than_the_host_has_are_na_with_the_reason(eight_gpu_host, write_matrix):
    found = planned(write_matrix(MATRIX, with_environments=False))
    assert {n: why for n, why in found.items() if why} == {
        16: "devices = 16, but this run has 8: the run's GPU lanes (8 of this host's GPUs)"}
    path = write_matrix("[run]\nparallel = 4\n" + MATRIX, with_environments=False)
    assert [n for n, why in planned(path).items() if why] == [8, 16]   # 4 lanes: 8 does not fit


def test_on_a_cpu_host_devices_are_virtual_up_to_its_cores(monkeypatch, write_matrix):
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: {"gpu_count": 0})
    monkeypatch.setattr(devices.os, "cpu_count", lambda: 4)
    found = planned(write_matrix(MATRIX, with_environments=False))
    assert {n: why for n, why in found.items() if why} == {
        8: "devices = 8, but this run has 4: this host's CPU cores (one per virtual device)",
        16: "devices = 16, but this run has 4: this host's CPU cores (one per virtual device)"}


def test_a_ray_cluster_is_judged_by_its_largest_node():
    cluster = {"nodes": [{"gpus": 4}, {"gpus": 8}, {"gpus": 2}], "gpus": 14, "cpus_per_node": 8}
    setup = SimpleNamespace(
        lanes=lambda: ([scheduling.Lane("ray 1", local=False)], ""),
        executor=SimpleNamespace(cluster=lambda: cluster))
    cell = SimpleNamespace(axes=Axes.defaults(devices=16))
    assert devices.capacity(setup, cell) == (8, "GPUs on the Ray cluster's largest node")
    assert devices.width(setup, cell) == 16
    cpu_cell = SimpleNamespace(axes=Axes.defaults(device="cpu", devices=2))
    assert devices.capacity(setup, cpu_cell)[0] == 8 and devices.width(setup, cpu_cell) == 1


def test_the_canonical_matrix_plans_its_scaling_rows_on_a_gpu_vm(eight_gpu_host, monkeypatch):
    matrix = matrix_mod.load(REPO / "matrix.toml", "full", gpu_found=True)
    cells = devices.fit_to_machine(choose_setup(matrix, None), matrix.cells)
    scaling = {(c.workload, c.environment, c.axes["devices"]): c.not_applicable for c in cells
               if c.task == "fit" and c.workload in ("cnn", "bert")
               and c.axes["precision"] == "float32" and c.axes["jit"] == "auto"}
    for env in ("keras-tensorflow", "keras-jax", "keras2", "torch", "jax", "tensorflow"):
        assert [scaling[("cnn", env, n)] for n in (1, 2, 4, 8)] == [None] * 4, env
    for env in ("keras-tensorflow", "keras-jax", "keras2", "hf-torch"):
        assert [scaling[("bert", env, n)] for n in (1, 2, 4, 8)] == [None] * 4, env
    assert "no data-parallel model.fit" in scaling[("cnn", "keras-torch", 2)]
    facts = {**EIGHT_GPUS, "gpu_count": 4, "gpus": GPUS[:4]}
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: facts)           # a 4-GPU VM
    cells = devices.fit_to_machine(choose_setup(matrix, None), matrix.cells)
    assert {c.not_applicable for c in cells if c.axes["devices"] == 8 and c.environment ==
            "jax"} == {"devices = 8, but this run has 4: the run's GPU lanes (4 of this host's "
                       "GPUs)"}
    smoke = matrix_mod.load(REPO / "matrix.toml", "smoke")
    assert all(c.not_applicable for c in smoke.cells if c.axes["devices"] > 1)


def test_compare_and_history_key_on_the_devices(write_matrix):
    """compare pairs cells by name, the history's series are by name, a cell's id hashes its
    coordinates: each device count is its own cell everywhere (weak scaling named by default)."""
    path = write_matrix(MATRIX.replace("[1, 2, 4, 8, 16]", "[1, 2]") + 'scaling = ["weak", '
                        '"strong"]\n', with_environments=False)
    cells = matrix_mod.load(path, "full").cells
    assert [c.name for c in cells] == [
        "cnn-fit-torch-b64", "cnn-fit-torch-b64-scaling=strong", "cnn-fit-torch-b64-devices=2",
        "cnn-fit-torch-b64-devices=2-scaling=strong"]
    assert len({c.id for c in cells}) == 4
