"""The Ray tests' fixtures (tests/executors/test_ray.py and test_ray_docker.py): the token both a
test cluster and its drivers use, the cluster itself (once per module) and a driver host without
a GPU."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from runner import settings
from runner.machine import hostinfo
from tests.executors.ray_local import LocalCluster


@pytest.fixture(scope="module")
def ray_token():
    """Token authentication, as the runner asks for it: the test cluster and its drivers share
    a token of their own (RAY_AUTH_TOKEN wins over ~/.ray/auth_token, whatever the machine
    holds). A Ray test module uses it for all its tests (pytestmark)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    def reload() -> None:        # Ray read the mode when this process imported it
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()

    token = secrets.token_hex(16)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "token")
        patch.setenv("RAY_AUTH_TOKEN", token)
        reload()
        yield token
    reload()


@pytest.fixture(scope="module")
def cluster(ray_token):
    root = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))   # Ray's sockets need a short path
    local = LocalCluster(root)
    try:
        local.start()
        yield local
    finally:
        local.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def no_gpu_here(monkeypatch):
    """The driver's own host: no GPU, no Docker path (the nodes decide for themselves)."""
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: {})
    for var in (settings.FLAVOUR, settings.GPU, "RAY_ADDRESS",
                "DL_BENCH_NODE_EXECUTOR", "DL_BENCH_RAY_RETRIES"):
        monkeypatch.delenv(var, raising=False)
