"""One cell runs ray → docker on the real engine: a Ray cluster's node starts the cell's container.
Apart from tests/executors/test_ray.py so that the engine's group (tests/conftest.py: the Docker
modules one at a time on one pytest worker) holds the one Ray test that uses the engine, and the
Ray module runs beside it on another worker. It starts a cluster of its own, so the two
modules' clusters never meet."""

from __future__ import annotations

import os

import pytest

from runner import environments, settings
from tests.executors.ray_local import HEAD_IP, WORKER_IP, ray_args, records, run_dirs
from tests.executors.test_ray import ONE_OK_CELL

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_token")]
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
DOCKER_BASE = os.environ.get("DOCKER_TEST_BASE", "dl-bench-base:bookworm")


@pytest.mark.slow
@pytest.mark.docker
def test_one_cell_runs_ray_to_docker_on_the_real_engine(cluster, no_gpu_here, write_matrix,
                                                        run_cli, results_dir, monkeypatch):
    from runner.environments.docker_engine import DockerUnavailable, connect

    try:
        client = connect(timeout=60)
    except DockerUnavailable as exc:
        pytest.skip(f"no Docker engine: {exc} (bash .ci/docker-setup.sh starts one)")
    try:
        if not client.images.list(name=DOCKER_BASE):
            pytest.skip(f"the engine has no base image {DOCKER_BASE} (bash .ci/docker-setup.sh)")
    finally:
        client.close()
    monkeypatch.setenv("DL_BENCH_NODE_EXECUTOR", "docker")     # forwarded to every node
    monkeypatch.setenv(settings.BASE_IMAGE, DOCKER_BASE)
    monkeypatch.setenv(settings.FLAVOUR, "cpu")
    code, out, _ = run_cli(write_matrix(ONE_OK_CELL, with_environments=False), *ray_args(cluster))
    assert code == 0, out
    (record,) = records(run_dirs(results_dir, "same")[-1]).values()
    meta = record["metadata"]
    assert record["status"] == "ok" and len(record["samples_ms"]) == 3
    assert meta["executor"] == "ray" and meta["node_executor"] == "docker"
    assert meta["host_in_container"] is True and meta["image_id"].startswith("sha256:")
    assert meta["lock_sha256"] == environments.venvs.sha256_file(
        environments.lock_path("numpy", "cpu"))
    assert meta["node_ip"] in (HEAD_IP, WORKER_IP)
