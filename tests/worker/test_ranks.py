"""A torch data-parallel cell's processes (runner/worker/ranks.py) and what a worker sets before
its framework is imported (runner/worker/apis/data_parallel). The ranks here are real worker
processes in the runner's own interpreter, which has no torch: every rank fails at once, which
is what rank 0 must notice, report and clean up after (the ranks that train are in
tests/worker/test_cnn.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runner.worker import ranks
from runner.worker.apis import data_parallel
from tests.executors.attempts import cell_spec

DDP_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def ddp_spec(tmp_path, monkeypatch):
    for name in DDP_ENV:                  # what launch() sets is undone after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    spec = cell_spec(api="torch", image="torch", workload="cnn", task="fit", batch_size=8,
                     devices=2, scaling="weak", options={"samples": 64}, environment="torch")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    return spec, path, tmp_path / "result.json"


def test_the_worker_prepares_virtual_devices_before_the_framework(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x " + data_parallel.XLA_DEVICES_FLAG + "=7")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    data_parallel.prepare_environment(cell_spec(api="keras", backend="jax", devices=4))
    assert os.environ["XLA_FLAGS"] == ("--xla_dump_to=/tmp/x "
                                       f"{data_parallel.XLA_DEVICES_FLAG}=4")
    assert "OMP_NUM_THREADS" not in os.environ
    data_parallel.prepare_environment(cell_spec(api="hf", devices=2))
    assert os.environ["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    shards = data_parallel.Shards(4, "weak", 32, rank=2)
    assert (shards.global_batch, shards.per_device, shards.own(list(range(128)))[:2]) == \
        (128, 32, [64, 65])
    assert data_parallel.Shards(4, "strong", 32).per_device == 8


def test_rank_0_starts_its_followers_and_hears_when_one_fails(ddp_spec):
    spec, spec_path, result_path = ddp_spec
    assert ranks.launch(spec.__class__.from_dict({**spec.to_dict(), "devices": 1}),
                        str(spec_path), str(result_path)) is None       # one process: none
    followers = ranks.launch(spec, str(spec_path), str(result_path))
    heard, why = threading.Event(), []
    followers.watch(lambda reason: (why.append(reason), heard.set()))
    assert heard.wait(60), "rank 0 never heard of its failed follower"
    assert why[0].startswith("rank 1: failed: ") and "torch" in why[0]
    assert os.environ["MASTER_ADDR"] == "127.0.0.1" and os.environ["WORLD_SIZE"] == "2"
    assert all(p.poll() is not None for p in followers.processes.values())


def test_a_failed_rank_0_ends_its_followers_and_records_every_rank(ddp_spec):
    _, spec_path, result_path = ddp_spec
    run = subprocess.run([sys.executable, "-m", "runner.worker", str(spec_path),
                          str(result_path)], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k not in DDP_ENV})
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(Path(result_path).read_text())
    assert result["status"] == "failed" and "torch" in result["error"]
    assert [r["rank"] for r in result["extra"]["ranks"]] == [0, 1]
    assert result["extra"]["ranks"][1]["status"] in ("failed", "crashed")
