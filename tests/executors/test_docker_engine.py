"""The Docker path against a real engine: build the numpy image FROM a local debootstrap base, run a
small matrix through `--executor docker`, check the sandbox from inside a container, and see a
timeout, a crashing worker, leftover containers and `doctor` handled.

The engine comes from .ci/docker-setup.sh (installs docker.io, starts dockerd on overlay2, else on
vfs, imports the base image); every test here skips with its reason when no engine can be had.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from runner import settings
from runner import cli
from runner.environments import images
from runner.paths import REPO_ROOT
from tests.matrices import matrix_text

pytestmark = [pytest.mark.slow, pytest.mark.docker]

def runner_containers(client) -> list:
    from runner.executors.containers import LABEL_OWNER

    mine = f":{os.getpid()}"
    return [c for c in client.containers.list(all=True, filters={"label": LABEL_OWNER})
            if c.labels.get(LABEL_OWNER, "").endswith(mine)]


def test_build_labels_the_image_and_skips_an_up_to_date_one(engine, numpy_image):
    rec, image = numpy_image
    config = image.attrs["Config"]
    assert config["Labels"]["org.dl-bench.lock-sha256"] == rec.lock_sha256
    assert config["Labels"]["org.dl-bench.recipe-sha256"] == rec.recipe_sha256
    assert config["User"] == "1000:1000"
    assert not any(e.startswith("LD_LIBRARY_PATH=") for e in config["Env"])
    assert engine.images.get(rec.alias).id == image.id
    lines: list[str] = []
    again, built = images.ensure(engine, rec, lines.append)
    assert not built and again.id == image.id and lines == [f"{rec.tag} up to date"]


def test_build_subcommand_uses_the_docker_executor(engine, numpy_image, base_env, write_matrix,
                                                    run_cli):
    path = write_matrix("""
        [[benchmarks]]
        workload = "matmul"
        environments = ["numpy"]
        size = "tiny"
    """)
    code, out, err = run_cli("build", path, "--executor", "docker")
    assert code == 0, out + err
    assert "environments ready: numpy (" in out


MATRIX = matrix_text("docker-e2e", steps=4, timeout=120, environments=["numpy"], benchmarks=[
    {"workload": "matmul", "environments": ["numpy"], "size": "tiny"},
    # The worker kills itself: it exits without a result.
    {"workload": "selftest", "environments": ["numpy"], "options": {"behaviour": "crash"}},
    # 12 MB of output: the log keeps its first and last bytes (the test sets 1 MB each).
    {"workload": "selftest", "environments": ["numpy"],
     "options": {"behaviour": "flood", "flood_mb": 12}},
    # Far more steps than the timeout allows: the container is killed.
    {"workload": "elementwise", "environments": ["numpy"], "size": "tiny", "steps": 100000000,
     "timeout": 4}])


def test_matrix_end_to_end_through_docker(engine, numpy_image, base_env, tmp_path,
                                          monkeypatch):

    monkeypatch.setenv(settings.LOG_HEAD_MB, "1")
    monkeypatch.setenv(settings.LOG_TAIL_MB, "1")
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX, encoding="utf-8")
    code = cli.main([str(matrix), "--executor", "docker", "--results-dir", str(tmp_path / "res"),
                     "--profile-cells", "matmul-*"])
    assert code == 1                      # the killed and the timed-out cells fail the run
    [run_dir] = (tmp_path / "res" / "docker-e2e").iterdir()
    records = {}
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        key = record["options"].get("behaviour") if record["workload"] == "selftest" else None
        records[(record["environment"], key or record["workload"])] = record

    ok = records[("numpy", "matmul")]
    assert ok["status"] == "ok", ok["error"]
    assert len(ok["samples_ms"]) == 4 and ok["median_ms"] > 0
    rec, image = numpy_image
    meta = ok["metadata"]
    assert meta["image_id"] == image.id
    assert meta["lock_sha256"] == rec.lock_sha256
    assert meta["executor"] == "docker"
    assert meta["python_executable"].startswith("/opt/venv/")
    assert (run_dir / ok["log"]).is_file()

    crashed = records[("numpy", "crash")]     # SIGKILL: docker's init reports 137, read as oom
    assert crashed["status"] in ("crashed", "oom"), crashed["error"]
    assert crashed["returncode"] == 137 and "SIGKILL" in crashed["error"]

    flooded = records[("numpy", "flood")]
    assert flooded["status"] == "ok", flooded["error"]
    log = (run_dir / flooded["log"]).read_bytes()
    assert 2 * 2**20 <= len(log) < 3 * 2**20           # 12 MB of output: 1 MB head, 1 MB tail
    assert b"[runner: output cut here:" in log and b"bytes left out" in log

    slow = records[("numpy", "elementwise")]
    assert slow["status"] == "timeout", slow["error"]
    assert slow["returncode"] is None

    # A profiled pass in a container: its files made in the cell folder, back in profiles/.
    profile = json.loads((run_dir / "profiles" / ok["cell_id"] / "profile.json").read_text())
    assert profile["status"] == "ok" and profile["source"] == "cProfile", profile
    assert (run_dir / "profiles" / ok["cell_id"] / "trace.json.gz").is_file()

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["executor"] == "docker"
    assert manifest["environments"]["numpy"]["image_id"] == image.id
    assert runner_containers(engine) == [], "containers left behind"


SANDBOX_PROBE = r"""
import json, os, socket
out = {"uid": os.getuid(), "interfaces": sorted(os.listdir("/sys/class/net"))}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    out["network"] = "reachable"
except OSError as exc:
    out["network"] = type(exc).__name__
try:
    open("/opt/dl-bench/runner/probe.txt", "w")
    out["code_mount"] = "writable"
except OSError as exc:
    out["code_mount"] = exc.strerror
with open("/cell/probe.txt", "w") as handle:
    handle.write("ok")
for name, path in (("root_fs", "/opt/probe.txt"), ("home", "/etc/probe.txt")):
    try:
        open(path, "w")
        out[name] = "writable"
    except OSError as exc:
        out[name] = exc.strerror
import subprocess, tempfile
with tempfile.NamedTemporaryFile("w", suffix=".sh", dir=os.environ["HOME"], delete=False) as f:
    f.write("#!/bin/sh\necho ran from tmp\n")
os.chmod(f.name, 0o755)
out["tmp_exec"] = subprocess.run([f.name], capture_output=True, text=True).stdout.strip()
for limit in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"):   # cgroup v2, v1
    if os.path.exists(limit):
        out["pids_max"] = open(limit).read().strip()
status = dict(line.split(":\t", 1) for line in open("/proc/self/status") if ":\t" in line)
out["cap_eff"] = status["CapEff"].strip()
out["no_new_privs"] = status.get("NoNewPrivs", "").strip()
import runner.worker
out["worker_from"] = list(runner.worker.__path__)[0]
print(json.dumps(out))
"""


def test_sandbox_seen_from_inside_a_container(engine, numpy_image, tmp_path):
    """The executor's own run options, with a probe instead of the worker."""
    from runner.executors.containers import container_user, give_container_the_work_dir, \
        host_capped_ulimits, run_options

    work = tmp_path / "cell"
    work.mkdir()
    opts = run_options(numpy_image[1].id, work, {}, labels={"org.dl-bench.test": "1"},
                       gpu_id=None, user=container_user(), ulimits=host_capped_ulimits())
    opts["command"] = ["python", "-P", "-c", SANDBOX_PROBE]
    give_container_the_work_dir(work, opts["user"])
    container = engine.containers.create(**opts)
    try:
        container.start()
        status = container.wait(timeout=120)
        logs = container.logs().decode()
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, logs
    seen = json.loads(logs.strip().splitlines()[-1])
    assert seen["uid"] != 0
    assert seen["interfaces"] == ["lo"]
    assert seen["network"] != "reachable"
    assert seen["code_mount"] == "Read-only file system"
    assert int(seen["cap_eff"], 16) == 0
    assert seen["no_new_privs"] == "1"
    assert seen["worker_from"].startswith("/opt/dl-bench/runner/")
    assert (work / "probe.txt").read_text() == "ok"
    assert not (REPO_ROOT / "runner" / "probe.txt").exists()
    assert seen["root_fs"] == seen["home"] == "Read-only file system"
    assert seen["tmp_exec"] == "ran from tmp"          # HOME=/tmp: writable, and exec allowed
    from runner.executors.containers import PIDS_LIMIT

    assert seen["pids_max"] == str(PIDS_LIMIT)


def test_leftovers_of_a_killed_run_are_removed_at_start(engine, numpy_image, docker_base):
    from runner.executors.containers import LABEL_OWNER, LABEL_RUNNER
    from runner.executors.docker import DockerExecutor

    dead = subprocess.Popen(["true"])
    dead.wait()                           # a pid that no longer runs: its run was killed
    import socket

    leftover = engine.containers.create(
        docker_base, ["sleep", "600"], network_mode="none",
        labels={LABEL_RUNNER: "1", LABEL_OWNER: f"{socket.gethostname()}:{dead.pid}"})
    executor = DockerExecutor(gpu=False)
    try:
        executor.client()
        remaining = [c.id for c in engine.containers.list(all=True,
                                                           filters={"label": LABEL_RUNNER})]
        assert leftover.id not in remaining
    finally:
        executor.close()
        try:
            leftover.remove(force=True)
        except Exception:
            pass


def test_doctor_reports_engine_and_one_line_fixes(engine, capsys):
    code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert "✓ Docker engine" in out
    from runner.machine import hostinfo

    if not hostinfo.gpu_found():
        assert code == 0                    # the local CPU path can run the matrix
        assert "– GPUs" in out
        fix_lines = [line for line in out.splitlines() if line.strip().startswith("fix:")]
        assert fix_lines and all(len(line) < 300 for line in fix_lines)


def test_toolkit_probe_without_nvidia_runtime_names_the_fix(engine, numpy_image):
    """On an engine without the NVIDIA runtime, a GPU request fails with 'could not select
    device driver', and doctor answers with the toolkit install line."""
    from runner.machine import hostinfo
    from runner.machine.checks import TOOLKIT_FIX
    from runner.studies import doctor

    if hostinfo.gpu_found():
        pytest.skip("a GPU machine: the failure path is not reachable here")
    check = doctor.check_toolkit(engine)
    assert not check.ok
    assert "could not select device driver" in check.detail
    assert check.fix == TOOLKIT_FIX


def test_doctor_without_an_engine_says_how_to_start_one(monkeypatch, capsys):
    pytest.importorskip("docker", reason="the docker SDK is not installed")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert cli.main(["doctor", "--executor", "docker"]) == 1
    out = capsys.readouterr().out
    assert "✗ Docker engine" in out
    assert "fix: install Docker" in out


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_compose_file_is_valid_and_mirrors_the_executor():
    result = subprocess.run(["docker-compose", "-f", str(REPO_ROOT / "compose.yaml"), "config"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    from runner.executors.containers import PIDS_LIMIT, TMPFS

    for expected in ("network_mode: none", "read_only: true", "no-new-privileges",
                     "memlock: -1", "stack: 67108864", "driver: nvidia", "init: true",
                     "- compute", "- utility", "user: 1000:1000", "target: /opt/dl-bench/runner",
                     f"pids_limit: {PIDS_LIMIT}",
                     *(f"- {target}:{options}" for target, options in TMPFS.items())):
        assert expected in text, expected
    assert text.count("    read_only: true") == text.count("    image: dl-bench/")  # every service


def test_a_cell_killed_by_the_oom_killer_is_recorded_as_oom(engine, numpy_image, base_env,
                                                           monkeypatch, write_matrix, run_cli,
                                                           results_dir):

    monkeypatch.setenv(settings.DOCKER_MEMORY, "128m")   # three 6000² float32 matrices need ~430 MB
    path = write_matrix(matrix_text(
        "docker-oom", steps=2, timeout=120, environments=["numpy", "keras-jax"],
        benchmarks=[{"workload": "matmul", "environments": ["numpy"], "options": {"n": 6000}}]),
        with_environments=False)
    code, out, err = run_cli(path, "--executor", "docker")
    assert code == 1, out + err
    [run_dir] = (results_dir / "docker-oom").iterdir()
    [record_path] = run_dir.glob("cells/*.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "oom", record["error"]
    assert runner_containers(engine) == []


def test_sigterm_stops_a_docker_run_as_ctrl_c_and_leaves_no_container(engine, numpy_image,
                                                                      docker_base, write_matrix,
                                                                      results_dir):
    """systemd or Slurm stopping a run: the container in flight is killed and removed, the
    finished record kept, the manifest finalised, exit 143."""
    path = write_matrix(matrix_text(
        "docker-sigterm", steps=2, timeout=300, environments=["numpy", "keras-jax"], benchmarks=[
            {"workload": "selftest", "environments": ["numpy"],
             "options": {"behaviour": "ok", "sleep_ms": 1}},
            {"workload": "selftest", "environments": ["numpy"], "options": {"behaviour": "hang"}}]),
        with_environments=False)
    from runner.executors.containers import LABEL_OWNER

    env = {**os.environ, settings.BASE_IMAGE: docker_base, settings.FLAVOUR: "cpu"}
    runner = subprocess.Popen(
        [sys.executable, "-m", "runner", str(path), "--executor", "docker", "--results-dir",
         str(results_dir)], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    owner = f"{socket.gethostname()}:{runner.pid}"

    def containers() -> list:
        return engine.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner}"})

    deadline = time.monotonic() + 300
    while not (list(results_dir.glob("docker-sigterm/*/cells/*.json")) and containers()):
        assert time.monotonic() < deadline and runner.poll() is None, runner.stdout.read()
        time.sleep(0.1)
    runner.send_signal(signal.SIGTERM)
    output, _ = runner.communicate(timeout=120)
    assert runner.returncode == 143, output
    assert containers() == [], "a container was left behind"
    [run_dir] = list(results_dir.glob("docker-sigterm/*"))
    [record] = [json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")]
    assert record["status"] == "ok"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["interrupted"] is True and manifest["finished_at"]
