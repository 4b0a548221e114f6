"""An engine that is slow or goes away fails one cell, never the run (runner/environments/docker_engine.py).

The real-engine tests put a small proxy on a Unix socket in front of the shared Docker engine
(tests/environments/engine_proxy.py) and point the runner at it (DOCKER_HOST): the proxy answers
container creation late, or never, or vanishes mid-run — the engine behind it is never stopped. Each
run must record the affected cells with the reason, remove the containers it made (checked on the
real engine afterwards) and finish, or stop with the --resume line — never a traceback.
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner import settings
from runner.environments import docker_engine as engine_mod
from runner.errors import UsageError
from runner.run.pipeline import Options
from runner.run.resume import resume_command

from tests.environments.engine_proxy import EngineProxy
from tests.matrices import environment, matrix_text



# --- settings -------------------------------------------------------------------------------------

def test_settings_default_and_from_the_environment(monkeypatch):
    monkeypatch.delenv(settings.ENGINE_TIMEOUT, raising=False)
    monkeypatch.delenv(settings.ENGINE_RECONNECT, raising=False)
    assert engine_mod.EngineSettings.from_env() == engine_mod.EngineSettings(600.0, 60.0)
    monkeypatch.setenv(settings.ENGINE_TIMEOUT, "1200")
    monkeypatch.setenv(settings.ENGINE_RECONNECT, "2.5")
    engine = engine_mod.EngineSettings.from_env()
    assert (engine.timeout_s, engine.reconnect_s) == (1200.0, 2.5)
    assert "1200 s (DL_BENCH_ENGINE_TIMEOUT)" in engine.summary()


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf"])
def test_a_bad_setting_is_one_line_and_exit_2(monkeypatch, write_matrix, run_cli, value):
    pytest.importorskip("docker", reason="the docker SDK is not installed")
    monkeypatch.setenv(settings.ENGINE_TIMEOUT, value)
    with pytest.raises(UsageError, match="DL_BENCH_ENGINE_TIMEOUT=.*seconds above 0"):
        engine_mod.EngineSettings.from_env()
    path = write_matrix("""
        [[benchmarks]]
        workload = "matmul"
        environments = ["numpy"]
    """)
    code, out, err = run_cli(path, "--executor", "docker", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "DL_BENCH_ENGINE_TIMEOUT" in err, out + err


# --- what a request that is not answered becomes (real sockets, no engine) -----------------

class SilentSocket:
    """A Unix socket that accepts connections and never answers."""

    def __init__(self, path: Path):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.held: list[socket.socket] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.server.close()
        for sock in self.held:
            sock.close()


# The docker SDK leaves the socket of a connection that failed open (closed when collected).
sdk_leaks_failed_sockets = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def api_client():
    """api_client(path, timeout): a docker SDK client of a Unix socket (closed afterwards)."""
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed")
    made = []

    def make(path: Path, timeout: float):
        made.append(docker.APIClient(base_url=f"unix://{path}", version="1.41", timeout=timeout))
        return made[-1]

    yield make
    for client in made:
        client.close()
    gc.collect()        # while the test's warning filters apply


def test_an_engine_that_does_not_answer_is_slow_and_not_tried_again(tmp_path, api_client):
    server = SilentSocket(tmp_path / "silent.sock")
    client = api_client(tmp_path / "silent.sock", 0.5)
    tries = []

    def ping() -> object:
        tries.append(1)
        return client.ping()

    started = time.monotonic()
    try:
        with pytest.raises(engine_mod.EngineSlow,
                           match=r"^engine did not create the container in 0.5 s"):
            engine_mod.call("create the container", ping, engine_mod.EngineSettings(0.5, 30))
    finally:
        server.close()
    assert len(tries) == 1 and time.monotonic() - started < 5


@sdk_leaks_failed_sockets
def test_an_engine_that_cannot_be_reached_is_tried_again_then_gone(tmp_path, api_client):
    client = api_client(tmp_path / "none.sock", 5)
    tries = []

    def ping() -> object:
        tries.append(time.monotonic())
        return client.ping()

    with pytest.raises(engine_mod.EngineGone) as caught:
        engine_mod.call("start the container", ping, engine_mod.EngineSettings(5, 2.5))
    assert str(caught.value) == ("engine unreachable for 2.5 s (No such file or directory): it "
                                 "did not start the container")
    assert len(tries) >= 2 and 2.0 <= tries[-1] - tries[0] <= 4.0
    tries.clear()
    with pytest.raises(engine_mod.EngineGone):
        engine_mod.call("create the container", ping, engine_mod.EngineSettings(5, 2.5),
                        retry=False)
    assert len(tries) == 1


@sdk_leaks_failed_sockets
def test_an_engine_that_comes_back_within_the_window_is_asked_again(tmp_path, api_client):
    path = tmp_path / "late.sock"
    client = api_client(path, 0.5)
    servers: list[SilentSocket] = []
    later = threading.Timer(1.0, lambda: servers.append(SilentSocket(path)))
    later.start()
    try:
        # It comes back (accepts), then stays silent: the second try reached it, and it was slow.
        with pytest.raises(engine_mod.EngineSlow):
            engine_mod.call("inspect the container", client.ping,
                            engine_mod.EngineSettings(0.5, 10))
    finally:
        later.join()
        for server in servers:
            server.close()


def test_the_resume_line_keeps_the_selection_and_the_executor(tmp_path):
    from runner.results.data.store import Store

    store = Store.create("demo", tmp_path / "res")
    opts = Options(matrix_path=Path("my matrix.toml"), only=["*-numpy-*", "jax"],
                   profile="smoke")

    line = resume_command(opts, "docker", store.root)
    args = shlex.split(line)
    assert args[1:] == ["-m", "runner", "my matrix.toml", "--resume", str(store.root),
                        "--executor", "docker", "--only", "*-numpy-*", "--only", "jax",
                        "--profile", "smoke"]


# --- the real engine behind a proxy ---------------------------------------------------------------
# The docker tests' fixtures (tests/conftest.py): a client of the real engine with the local base
# image, and the numpy image built FROM it (both skip, saying why, without an engine).


def slow_matrix(benchmarks: list[dict]) -> str:
    """The slow-engine run of `benchmarks` on two environments of the numpy image: numpy-slow's
    variable marks the creates of its containers, the ones the proxy holds back."""
    return matrix_text("slow-engine", steps=2, timeout=120, benchmarks=benchmarks, environments={
        "numpy": environment("numpy"),
        "numpy-slow": environment("numpy", env={"ENGINE_PROXY_MARK": "slow-create"})})


SLOW = slow_matrix([{"workload": "selftest", "environments": ["numpy-slow", "numpy"],
                     "options": {"behaviour": "ok", "sleep_ms": 10}}])


@pytest.fixture
def proxy(tmp_path):
    made: list[EngineProxy] = []

    def start(**kwargs) -> EngineProxy:
        made.append(EngineProxy(Path(f"/tmp/dl-bench-proxy-{os.getpid()}.sock"), **kwargs))
        return made[-1].start()

    yield start
    for one in made:
        one.kill()


@pytest.fixture
def through(monkeypatch, engine, numpy_image, docker_base):
    """The runner's environment: the engine behind a proxy, short engine timeouts."""
    def point(proxy: EngineProxy, timeout: float, reconnect: float = 3) -> dict[str, str]:
        variables = {"DOCKER_HOST": proxy.url, settings.ENGINE_TIMEOUT: str(timeout),
                     settings.ENGINE_RECONNECT: str(reconnect), settings.BASE_IMAGE: docker_base,
                     settings.FLAVOUR: "cpu"}
        for key, value in variables.items():
            monkeypatch.setenv(key, value)
        return variables
    return point


def mine(client, pid: int) -> list:
    """Containers of the runner process `pid` left on the real engine."""
    from runner.executors.containers import LABEL_OWNER

    return [c for c in client.containers.list(all=True, filters={"label": LABEL_OWNER})
            if c.labels.get(LABEL_OWNER, "").endswith(f":{pid}")]


def cells(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        sleep = record["options"].get("sleep_ms")     # as the matrix writes it: 10, not 10.0
        out[f"{record['environment']}:{sleep if sleep is None else format(sleep, 'g')}"] = record
    return out


@pytest.mark.slow
@pytest.mark.docker
def test_a_slow_engine_fails_the_cell_and_the_run_goes_on(engine, proxy, through,
                                                         write_matrix, run_cli, results_dir):
    """The engine makes the marked cell's container but answers 75 s late: the cell fails
    after the 45 s timeout with the reason, its container is removed, the next cell runs.
    (45 s: a vfs engine shared with other work may take 20 s to create a container.)"""
    slow = proxy(slow_marker=b"slow-create", delay_s=75)
    through(slow, timeout=45)
    path = write_matrix(SLOW, with_environments=False)
    code, out, err = run_cli(path, "--executor", "docker")
    assert code == 1, out + err
    assert "Traceback" not in out + err and "stopped:" not in out
    assert len(slow.delayed) == 1
    [run_dir] = (results_dir / "slow-engine").iterdir()
    found = cells(run_dir)
    failed = found["numpy-slow:10"]
    assert failed["status"] == "crashed"
    assert failed["error"] == ("engine did not create the container in 45 s "
                               "(DL_BENCH_ENGINE_TIMEOUT)")
    assert found["numpy:10"]["status"] == "ok", found["numpy:10"]["error"]
    assert mine(engine, os.getpid()) == []


@pytest.mark.slow
@pytest.mark.docker
def test_an_engine_slow_three_cells_in_a_row_stops_the_run(engine, proxy, through,
                                                          write_matrix, run_cli, results_dir):
    """Creates that never reach the engine: three cells fail one after the other, then the
    run stops with the --resume line instead of waiting on every cell left."""
    silent = proxy(slow_marker=b"slow-create", delay_s=None)
    through(silent, timeout=5)
    path = write_matrix(slow_matrix([
        {"workload": "selftest", "environments": ["numpy-slow"],
         "options": {"behaviour": "ok", "sleep_ms": [1, 2, 3]}},
        {"workload": "selftest", "environments": ["numpy"],
         "options": {"behaviour": "ok", "sleep_ms": 4}}]), with_environments=False)
    code, out, err = run_cli(path, "--executor", "docker")
    assert code == 1, out + err
    assert "Traceback" not in out + err
    [run_dir] = (results_dir / "slow-engine").iterdir()
    found = cells(run_dir)
    assert sorted(found) == ["numpy-slow:1", "numpy-slow:2", "numpy-slow:3"]
    assert all("engine did not create the container in 5 s" in r["error"]
               for r in found.values())
    [stop] = [line for line in out.splitlines() if line.startswith("stopped:")]
    assert "too slow 3 cells in a row" in stop and "1 runs not done" in stop, stop
    assert f"--resume {run_dir} --executor docker" in stop, stop
    assert mine(engine, os.getpid()) == []


GONE = matrix_text("gone-engine", steps=2, timeout=120, environments=["numpy"], benchmarks=[
    {"workload": "selftest", "options": {"behaviour": "hang"}},
    {"workload": "selftest", "options": {"behaviour": "ok", "sleep_ms": [10, 11]}}])


@pytest.mark.slow
@pytest.mark.docker
def test_an_engine_gone_mid_cell_stops_the_run_and_resume_finishes_it(
        engine, proxy, through, write_matrix, results_dir):
    """The proxy vanishes while a cell's container runs: the runner (its own process, as a
    user starts it) records that cell with the reason, stops with the --resume line and exits
    1 without a traceback. With the engine back, that line finishes the run, and the container
    the engine could not be asked to remove is removed by it."""
    gone = proxy()
    env = {**os.environ, **through(gone, timeout=120, reconnect=3)}
    path = write_matrix(GONE, with_environments=False)
    runner = subprocess.Popen([sys.executable, "-m", "runner", str(path), "--executor", "docker",
                               "--results-dir", str(results_dir)], cwd=path.parent, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not [c for c in mine(engine, runner.pid) if c.status == "running"]:
        assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
        time.sleep(0.3)
    time.sleep(1)
    gone.kill()
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 1, out + err
    assert "Traceback" not in out + err, err
    [run_dir] = (results_dir / "gone-engine").iterdir()
    [hung] = cells(run_dir).values()
    assert hung["status"] == "crashed"
    assert hung["error"].startswith("engine unreachable for 3 s (")
    assert "it did not report the container's exit" in hung["error"]
    [stop] = [line for line in out.splitlines() if line.startswith("stopped:")]
    assert "the Docker engine is gone" in stop and "2 runs not done" in stop, stop
    left = mine(engine, runner.pid)
    assert [c.status for c in left] == ["running"]   # the engine could not be asked

    proxy()                                          # the engine is back, at the same place
    command = shlex.split(stop.split("continue with: ", 1)[1])
    resumed = subprocess.run(command, cwd=path.parent, env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr   # the hung cell stays
    assert "Traceback" not in resumed.stdout + resumed.stderr
    found = cells(run_dir)
    assert [found[k]["status"] for k in ("numpy:10", "numpy:11")] == ["ok", "ok"]
    assert mine(engine, runner.pid) == []
    assert engine.containers.list(all=True, filters={"name": left[0].name}) == []


@pytest.mark.slow
@pytest.mark.docker
def test_doctor_shows_the_engine_timeouts(engine, monkeypatch, capsys):
    from runner import cli

    monkeypatch.setenv(settings.ENGINE_TIMEOUT, "900")
    monkeypatch.delenv(settings.ENGINE_RECONNECT, raising=False)
    cli.main(["doctor"])
    out = capsys.readouterr().out
    assert "a request may take 900 s (DL_BENCH_ENGINE_TIMEOUT)" in out
    assert "waited for 60 s (DL_BENCH_ENGINE_RECONNECT)" in out
