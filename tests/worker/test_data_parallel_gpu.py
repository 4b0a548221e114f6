"""Data-parallel cells on real GPUs (docs/scaling.md): the CNN on one and two GPUs in every
framework, NCCL under DDP, MirroredStrategy and XLA, each cell on a lane of two GPUs. Runs with
`pytest -m gpu` on a machine with at least two NVIDIA GPUs (the frameworks' CUDA environments
are built as for any run there); the CPU suite runs the same paths on virtual devices
(tests/worker/test_cnn.py)."""

from __future__ import annotations

import json

import pytest

from runner import cli
from runner.machine import hostinfo
from tests.matrices import matrix_text

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

ALL_REDUCE = {"keras-jax": "XLA collectives (NCCL)", "keras-tensorflow": "NcclAllReduce",
              "keras2": "NcclAllReduce", "torch": "nccl", "jax": "XLA collectives (NCCL)",
              "tensorflow": "NcclAllReduce"}


def matrix() -> str:
    return matrix_text("dp-gpu", warmup_steps=2, steps=20, environments=list(ALL_REDUCE),
                       benchmarks=[{"workload": "cnn", "environments": ["*"], "batch_size": 256,
                                    "size": "small", "device": "gpu", "devices": [1, 2],
                                    "scaling": "strong"}])


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[dict]:
    if len(hostinfo.visible_gpus(hostinfo.gpus())) < 2:
        pytest.skip("needs two NVIDIA GPUs (NVML found fewer)")
    folder = tmp_path_factory.mktemp("dp-gpu")
    (folder / "matrix.toml").write_text(matrix())
    code = cli.main([str(folder / "matrix.toml"), "--results-dir", str(folder / "results")])
    (run,) = list((folder / "results" / "dp-gpu").iterdir())
    found = [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]
    assert code == 0, {r["cell_name"]: r["error"] for r in found if r["status"] != "ok"}
    return found


def test_every_framework_trains_on_two_gpus_with_nccl_and_one_gpus_first_loss(records):
    for env, all_reduce in ALL_REDUCE.items():
        one, two = ([r for r in records if r["environment"] == env and r["devices"] == n][0]
                    for n in (1, 2))
        facts = two["effective"]["data_parallel"]
        assert facts["world_size"] == 2 and facts["all_reduce"] == all_reduce, (env, facts)
        assert len(two["metadata"]["gpu_indices"]) == 2, env
        # TF32 on both (the frameworks' GPU default): the same-answer check's TF32 tolerance.
        assert two["loss_first"] == pytest.approx(one["loss_first"], rel=1e-2), env
    ddp = next(r for r in records if r["environment"] == "torch" and r["devices"] == 2)
    assert [rank["vram_peak_mb"] > 0 for rank in ddp["extra"]["ranks"]] == [True, True]
