"""The Ray executor on a real local Ray cluster: a head and a worker node on loopback addresses,
each declaring one GPU, so the GPU scheduling is exercised on a machine without one.

Checked: a matrix through the ray executor gives the same cells and statuses as a local run,
on both nodes, with node and GPU identity and the lock's hash in every record; a task whose
process is killed is retried, then recorded; a node whose lock differs from the driver's fails
the cell and says why; an interrupted cluster run resumes (ray → docker on the real engine:
test_ray_docker.py). The cluster (tests/executors/ray_local.py) is started once for the module
and always stopped.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT as REPO
from tests.executors.ray_local import (HEAD_IP, WORKER_IP, LocalCluster, free_port, ray_args,
                                       records, run_dirs)
from tests.matrices import matrix_text, this_interpreter

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

# --- a matrix through Ray: the same cells and statuses as a local run ------------------------------

SAME_CELLS = [
    {"workload": "selftest", "options": {"behaviour": "ok", "sleep_ms": [50, 51, 52]}},
    {"workload": "selftest", "options": {"behaviour": ["fail", "crash"]}},
    {"workload": "selftest", "options": {"behaviour": "hang"}, "timeout": 3},
    {"workload": "selftest", "device": "cpu", "options": {"behaviour": "ok", "sleep_ms": 53}},
]


def same_matrix(benchmarks: list[dict] = SAME_CELLS, **run_settings) -> str:
    return matrix_text("same", steps=3, timeout=60, **run_settings, benchmarks=benchmarks)


SAME = same_matrix()
ONE_OK_CELL = same_matrix([{"workload": "selftest", "options": {"behaviour": "ok", "sleep_ms": 50}}])


def summary_rows(run_dir: Path) -> set[tuple[str, str]]:
    import csv

    with (run_dir / "summary.csv").open() as handle:
        return {(row["cell_id"], row["status"]) for row in csv.DictReader(handle)}


@pytest.mark.slow      # the numpy environment, built from its lock on the node
def test_a_matrix_through_ray_gives_the_cells_and_statuses_of_a_local_run(
        cluster, no_gpu_here, write_matrix, run_cli, results_dir):
    matrix = write_matrix(SAME, with_environments=False)
    code, local_out, _ = run_cli(matrix, "--executor", "local")
    assert code == 1, local_out
    code, out, _ = run_cli(matrix, *ray_args(cluster), "--profile-cells", "*sleep_ms=53*")
    assert code == 1, out
    assert f"executor: ray (--executor ray; the Ray cluster at {cluster.address}, " \
           "RAY_AUTH_MODE=token)" in out
    assert "parallel: 2 cells at once (task slots); CPU cells one at a time, alone ([run] " \
           "parallel = 'auto': 2 Ray node(s), 2 GPUs)" in out
    local_dir, ray_dir = run_dirs(results_dir, "same")
    local, remote = records(local_dir), records(ray_dir)
    assert {k: r["status"] for k, r in remote.items()} == \
        {k: r["status"] for k, r in local.items()}
    assert sorted(r["status"] for r in remote.values()) == \
        ["crashed", "failed", "ok", "ok", "ok", "ok", "timeout"]
    assert summary_rows(ray_dir) == summary_rows(local_dir)     # the reports agree

    for key, record in remote.items():
        meta = record["metadata"]
        assert meta["executor"] == "ray" and meta["node_executor"] == "local"
        assert meta["node_ip"] in (HEAD_IP, WORKER_IP) and meta["ray_node_id"]
        assert meta["node_name"] == socket.gethostname()
        assert meta["lock_sha256"] == local[key]["metadata"]["lock_sha256"]
        if record["device"] == "cpu":
            assert "gpu_index" not in meta
        else:                     # the GPU Ray gave the task, and the worker saw only that one
            assert meta["gpu_index"] == 0
            if record["status"] == "ok":
                assert meta["env_flags"]["CUDA_VISIBLE_DEVICES"] == "0"
        assert (ray_dir / record["log"]).is_file()
    crashed = next(r for r in remote.values() if r["status"] == "crashed")
    assert "signal 9" in crashed["error"]
    assert {r["metadata"]["node_ip"] for r in remote.values()} == {HEAD_IP, WORKER_IP}
    # A profiled pass on a node: its table and trace come back inside the task's result.
    (profiled,) = (ray_dir / "profiles").iterdir()
    profile = json.loads((profiled / "profile.json").read_text())
    assert profile["status"] == "ok" and "sleep_ms=53" in profile["cell_name"], profile
    assert json.loads((profiled / "kernels.json").read_text())["rows"]
    assert not (local_dir / "profiles").exists()
    manifest = json.loads((ray_dir / "manifest.json").read_text())
    assert manifest["executor"] == "ray" and manifest["flavour"] == "node"
    nodes = manifest["parallel"]["ray"]["nodes"]
    assert sorted(n["node_ip"] for n in nodes) == [HEAD_IP, WORKER_IP]
    assert manifest["parallel"]["ray"]["gpus"] == 2


@pytest.mark.slow      # the numpy environment, built from its lock on the node
def test_a_user_workload_is_shipped_with_its_cell_and_staged_on_the_node(
        cluster, no_gpu_here, tmp_path, run_cli, results_dir):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "helpers.py").write_text("SIDE = 8\n")
    (bench / "bench.py").write_text(
        "import os\nimport numpy as np\nfrom helpers import SIDE\n\n"
        "def numpy_run(spec):\n    a = np.ones((SIDE, SIDE), np.float32)\n    return lambda: a @ a\n\n"
        "def answer(spec, output):\n"
        "    return {'sum': float(output.sum()), 'staged': float('workloads' in __file__)}\n")
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(matrix_text(
        "user", steps=3, warmup_steps=None,
        tables={"workloads": {"w": {"file": "bench/bench.py", "tasks": ["run"]}}},
        benchmarks=[{"workload": "w"}]))
    code, out, _ = run_cli(matrix, *ray_args(cluster))
    assert code == 0, out
    (run_dir,) = run_dirs(results_dir, "user")
    (record,) = records(run_dir).values()
    assert record["status"] == "ok" and record["metadata"]["executor"] == "ray"
    assert record["metadata"]["workload_sha256"] == record["user_workload"]["sha256"]
    assert record["answer"] == {"sum": 8.0 ** 3, "staged": 1.0}


def test_profile_auto_looks_at_the_clusters_gpus(cluster, no_gpu_here, write_matrix, run_cli):
    matrix = write_matrix(same_matrix(profile=None), with_environments=False)
    code, out, _ = run_cli("plan", matrix, *ray_args(cluster))
    assert code == 0, out
    assert out.splitlines()[0] == "profile: full (auto: the Ray cluster has 2 GPUs)"
    code, out, _ = run_cli("plan", matrix, "--executor", "local")
    assert out.splitlines()[0].startswith("profile: smoke (auto: no GPU found")


def test_doctor_names_the_cluster(cluster, no_gpu_here, write_matrix, capsys):
    from runner import cli

    code = cli.main(["doctor", str(write_matrix(SAME, with_environments=False)), *ray_args(cluster)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"✓ Ray cluster: the Ray cluster at {cluster.address}, RAY_AUTH_MODE=token: Ray " \
           f"{ray.__version__}, " \
           "2 node(s), 2 GPUs, 2 CPUs" in out
    assert "executor: ray" in out and "flavour: node" in out


# --- lost tasks ---------------------------------------------------------------------------------------

def long_cell(name: str = "killed", steps: int = 8) -> str:
    return matrix_text(name, steps=steps, timeout=120,
                       environments={"numpy-here": this_interpreter()},
                       benchmarks=[{"workload": "selftest",
                                    "options": {"behaviour": "ok", "sleep_ms": 300}}])


LONG_CELL = long_cell()


def runs_a_worker(proc) -> bool:
    """Whether a Ray task process has started its cell's worker (the supervisor and the worker
    are its descendants): it has reported its node by then, and has seconds of steps ahead."""
    import psutil

    try:
        return any("runner.worker" in " ".join(child.cmdline())
                   for child in proc.children(recursive=True))
    except psutil.Error:
        return False


def kill_tasks(cluster: LocalCluster, count: int, stop: list) -> list[int]:
    """SIGKILL the Ray worker running the cell, `count` times (each retry is a new process),
    each once it has started its cell's worker, as a real loss would find it. Deterministic:
    no fixed grace (the task could end during one, and the killer then died on a vanished
    process, never killing the retry); a process that is gone is skipped, not fatal."""
    import psutil

    killed: list[int] = []
    deadline = time.monotonic() + 90
    while len(killed) < count and time.monotonic() < deadline and not stop:
        for proc in cluster.task_processes():
            if proc.pid in killed or not runs_a_worker(proc):
                continue
            try:
                proc.send_signal(signal.SIGKILL)
            except (psutil.Error, ProcessLookupError):
                continue
            killed.append(proc.pid)
        time.sleep(0.05)
    return killed


def run_while_killing(cluster, run_cli, matrix, kills: int) -> tuple[int, str, list[int]]:
    import threading

    killed: list[int] = []
    stop: list = []
    killer = threading.Thread(target=lambda: killed.extend(kill_tasks(cluster, kills, stop)))
    killer.start()
    try:
        code, out, _ = run_cli(matrix, *ray_args(cluster))
    finally:
        stop.append(True)
        killer.join()
    return code, out, killed


def test_a_killed_task_is_retried_then_recorded(cluster, no_gpu_here, write_matrix, run_cli,
                                                results_dir, monkeypatch):
    monkeypatch.setenv("DL_BENCH_RAY_RETRIES", "1")
    matrix = write_matrix(LONG_CELL, with_environments=False)

    code, out, killed = run_while_killing(cluster, run_cli, matrix, kills=1)
    assert code == 0, out
    assert len(killed) == 1
    (record,) = records(run_dirs(results_dir, "killed")[-1]).values()
    assert record["status"] == "ok" and len(record["samples_ms"]) == 8   # the retry measured
    log = (run_dirs(results_dir, "killed")[-1] / record["log"]).read_text()
    assert "[runner: ray task lost, try 1 on node 127.0.0." in log and "WorkerCrashedError" in log

    code, out, killed = run_while_killing(cluster, run_cli, matrix, kills=2)
    assert code == 1, out
    assert len(killed) == 2
    (record,) = records(run_dirs(results_dir, "killed")[-1]).values()
    assert record["status"] == "crashed"
    assert record["error"].startswith("the Ray task was lost 2 times (1 retries): try 1 on node ")
    assert "try 2 on node 127.0.0." in record["error"] and "WorkerCrashedError" in record["error"]
    meta = record["metadata"]        # where it was lost: the node said so before it died
    assert meta["node_ip"] in (HEAD_IP, WORKER_IP) and meta["gpu_index"] == 0
    assert meta["executor"] == "ray"


# --- same environments everywhere ---------------------------------------------------------------------

def test_a_node_whose_lock_differs_from_the_drivers_fails_the_cell(cluster, no_gpu_here,
                                                                    write_matrix, run_cli,
                                                                    results_dir, monkeypatch):
    """The driver's lock hash against the node's: here the driver is made to expect another
    hash; the node refuses before it builds or runs anything."""
    from runner.executors import ray as ray_executor

    monkeypatch.setattr(ray_executor, "expected_locks",
                        lambda source: {"cpu": "0" * 64, "cuda": "0" * 64})
    code, out, _ = run_cli(write_matrix(ONE_OK_CELL, with_environments=False), *ray_args(cluster))
    assert code == 1, out
    (record,) = records(run_dirs(results_dir, "same")[-1]).values()
    assert record["status"] == "failed"
    assert "images/numpy/requirements.lock has sha256 " in record["error"]
    assert "the driver's has 000000000000: the node would not run the lock's environment" in \
        record["error"]
    assert record["samples_ms"] == []


# --- an interrupted cluster run resumes -------------------------------------------------------------

RESUMABLE = matrix_text("resumable", repeats=2, steps=4, timeout=60,
                        environments={"numpy-here": this_interpreter()},
                        benchmarks=[{"workload": "selftest",
                                     "options": {"behaviour": "ok", "sleep_ms": [200, 201, 202]}}])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_cluster_run_resumes_without_loss_or_repeats(cluster, write_matrix,
                                                                     results_dir, sig):
    """SIGTERM as Ctrl-C: ray.init would have replaced the runner's handler with sys.exit."""
    matrix = write_matrix(RESUMABLE, with_environments=False)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DL_BENCH_RAY_RETRIES")}

    def start(*extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results_dir),
             *ray_args(cluster), *extra], cwd=REPO, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    runner = start()
    deadline = time.monotonic() + 120
    while not run_dirs(results_dir, "resumable") or \
            len(records(run_dirs(results_dir, "resumable")[0])) < 2 or not cluster.task_processes():
        assert time.monotonic() < deadline and runner.poll() is None, runner.stdout.read()
        time.sleep(0.05)
    runner.send_signal(sig)
    output, _ = runner.communicate(timeout=90)
    assert runner.returncode == 128 + sig, output
    (run_dir,) = run_dirs(results_dir, "resumable")
    settle = time.monotonic() + 30
    while cluster.task_processes() and time.monotonic() < settle:
        time.sleep(0.1)
    assert cluster.task_processes() == []        # the cancelled tasks stopped on their nodes
    before = {k: json.dumps(r, sort_keys=True) for k, r in records(run_dir).items()}
    assert 2 <= len(before) < 6

    resumed = start("--resume", str(run_dir))
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    after = records(run_dir)
    assert len(after) == 6 and all(r["status"] == "ok" for r in after.values())
    for key, text in before.items():
        assert json.dumps(after[key], sort_keys=True) == text
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 6


# --- a local Ray instance ----------------------------------------------------------------------------

def test_without_an_address_a_local_ray_instance_runs_the_cells(write_matrix, results_dir):
    """No --ray-address, no RAY_ADDRESS: the runner starts a Ray instance of its own for the
    run and stops it afterwards. (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps that single-node
    instance on 127.0.0.1 on this test machine.)"""
    text = long_cell("here", steps=3)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "CUDA_VISIBLE_DEVICES")}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    done = subprocess.run([sys.executable, "-m", "runner", str(write_matrix(
        text, with_environments=False)), "--executor", "ray", "--results-dir", str(results_dir)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "executor: ray (--executor ray; a local Ray instance (no --ray-address or " \
           "RAY_ADDRESS), RAY_AUTH_MODE=token)" in done.stdout
    assert "parallel: 1 cell at a time ([run] parallel = 'auto': 1 Ray node(s), no GPU: one " \
           "cell per node)" in done.stdout
    (record,) = records(run_dirs(results_dir, "here")[0]).values()
    assert record["status"] == "ok" and record["metadata"]["node_ip"] == "127.0.0.1"
    assert "gpu_index" not in record["metadata"]           # a cluster without GPUs: CPU tasks


# --- no cluster -----------------------------------------------------------------------------------------

def test_an_address_where_no_cluster_answers_is_one_line(write_matrix, run_cli):
    code, _, err = run_cli("plan", write_matrix(SAME, with_environments=False), "--executor",
                           "ray", "--ray-address", f"127.0.0.1:{free_port()}")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no Ray cluster answers at 127.0.0.1:" in err and "Connection refused" in err


def test_a_driver_without_the_clusters_token_is_refused(cluster, write_matrix):
    """The runner's driver (in a process of its own: Ray keeps the token it first read) with
    another token: refused, in one line of the runner's that says where the token comes from
    (after Ray's own retries, ~20 s, and its log lines)."""
    env = {**cluster.env, "RAY_AUTH_TOKEN": secrets.token_hex(16)}       # not the cluster's
    done = subprocess.run([sys.executable, "-m", "runner", "plan",
                           str(write_matrix(SAME, with_environments=False)), *ray_args(cluster)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: no Ray cluster answers at {cluster.address}: ")
    assert "the driver needs the cluster's token: RAY_AUTH_TOKEN" in last
    assert "Authentication token is missing or incorrect" in done.stderr      # Ray's own word


def test_the_example_cluster_passes_rays_own_schema_check():
    """What `ray up` checks first: the example cluster YAML against Ray's schema."""
    import yaml
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((REPO / "examples" / "ray-cluster-a100.yaml").read_text())
    validate_config(prepare_config(config))
    assert "docker" not in config            # Ray on the VMs; the cells' containers are the runner's
    workers = config["available_node_types"]["a100"]
    assert workers["min_workers"] == workers["max_workers"] >= 1
    setup = "\n".join(config["worker_setup_commands"])
    assert "nvidia-container-toolkit" in setup and "docker.io" in setup
    assert "runner build matrix.toml --executor docker" in setup
    assert "pip install -q -e '.[ray]'" in "\n".join(config["setup_commands"])
    # Token authentication everywhere: one token, copied to every node, every Ray started so.
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in config[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start), key


# --- the cluster goes away under a run -------------------------------------------------------

GONE = matrix_text("cluster-gone", steps=2, timeout=120, benchmarks=[
    {"workload": "selftest", "options": {"behaviour": "hang"}},
    {"workload": "selftest", "options": {"behaviour": "ok", "sleep_ms": [10, 11]}}])


def test_a_run_whose_cluster_goes_away_stops_with_the_resume_line(ray_token, write_matrix,
                                                                   results_dir):
    """A one-node cluster of its own (the module's stays up for the other tests), stopped
    while a cell runs on it: the driver records that cell as crashed with the reason, stops
    with the --resume line (exit 1, no traceback) before Ray would end it, and runs nothing
    after it."""
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    local = LocalCluster(root)
    matrix = write_matrix(GONE, with_environments=False)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "DL_BENCH_RAY_RETRIES", "CUDA_VISIBLE_DEVICES")}
    try:
        local.start_node("--head", f"--node-ip-address={HEAD_IP}", f"--port={local.port}",
                         f"--temp-dir={root}", "--include-dashboard=false",
                         f"--ray-client-server-port={free_port()}")
        runner = subprocess.Popen(
            [sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results_dir),
             "--executor", "ray", "--ray-address", local.address], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while not local.task_processes():
            assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
            time.sleep(0.2)
        time.sleep(1)
        stopped_at = time.monotonic()
        local.stop()
        out, err = runner.communicate(timeout=120)
        took = time.monotonic() - stopped_at
    finally:
        local.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert runner.returncode == 1, out + err
    assert "Traceback" not in out + err
    [stop_line] = [line for line in out.splitlines() if line.startswith("stopped:")]
    (run_dir,) = run_dirs(results_dir, "cluster-gone")
    assert f"--resume {run_dir}" in stop_line and "--executor ray" in stop_line, stop_line
    assert "Ray cluster" in stop_line and "2 runs not done" in stop_line, stop_line
    [record] = records(run_dir).values()
    assert record["status"] == "crashed"
    assert "stopped answering" in record["error"], record["error"]
    assert json.loads((run_dir / "manifest.json").read_text())["stopped"]
    print(f"stopped {took:.1f} s after the cluster")
