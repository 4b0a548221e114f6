"""The supervisor every local worker runs under (runner/executors/supervisor.py), run for real
with small stand-in workers: nothing the worker starts survives it (a child that calls setsid and
whose parent exits included), on the worker's exit, on SIGTERM and when the runner is SIGKILLed;
the worker's exit status comes through; its log keeps the head and tail of a flood. Plus the
capped log on its own, and the local executor's worker environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from runner import settings
from runner.environments import Source
from runner.errors import UsageError
from runner.executors import local
from runner.executors.supervisor import CappedLog

SUPERVISOR = local.SUPERVISOR

# A stand-in worker: leaves a grandchild that escapes its session and parentage (setsid, and
# its parent exits at once), ignores SIGTERM and carries MARKER in its command line; then prints
# LINES lines and sleeps SLEEP seconds and exits with CODE.
WORKER = r"""
import subprocess, sys, time
marker, lines, sleep, code = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
escape = ("import signal, subprocess, sys; subprocess.Popen([sys.executable, '-c', "
          "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)', "
          "sys.argv[1]], start_new_session=True)")
subprocess.run([sys.executable, "-c", escape, marker], start_new_session=True, check=True)
for i in range(lines):
    print(f"line {i} " + "x" * 90)
sys.stdout.flush()
time.sleep(sleep)
sys.exit(code)
"""


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info.get("cmdline") or []):
            found.append(proc)
    return found


def wait_until(condition, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def gone(marker: str) -> bool:
    return all(p.status() == psutil.STATUS_ZOMBIE for p in marked(marker) if p.is_running())


def start(tmp_path: Path, marker: str, *, lines: int = 3, sleep: float = 0.0, code: int = 0,
          head: int = 4096, tail: int = 4096, parent: int | None = None) -> subprocess.Popen:
    command = [sys.executable, "-c", WORKER, marker, str(lines), str(sleep), str(code)]
    return subprocess.Popen(
        [sys.executable, "-I", str(SUPERVISOR), "--parent", str(parent or os.getpid()),
         "--log", str(tmp_path / "worker.log"), "--head", str(head), "--tail", str(tail), "--",
         *command], start_new_session=True)


@pytest.fixture
def marker():
    token = f"dl-bench-test-{uuid.uuid4().hex}"
    yield token
    for proc in marked(token):           # never leave one behind, whatever the test found
        proc.kill()


def test_the_worker_exit_code_comes_through_and_an_escaped_child_is_killed(tmp_path, marker):
    supervisor = start(tmp_path, marker, code=3)
    assert supervisor.wait(timeout=30) == 3
    assert gone(marker)
    assert (tmp_path / "worker.log").read_text().startswith("line 0 ")


def test_a_worker_killed_by_a_signal_is_reported_as_killed_by_it(tmp_path):
    supervisor = subprocess.Popen(
        [sys.executable, "-I", str(SUPERVISOR), "--parent", str(os.getpid()),
         "--log", str(tmp_path / "worker.log"), "--head", "100", "--tail", "100", "--",
         sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert supervisor.wait(timeout=30) == -signal.SIGKILL


def test_sigterm_kills_the_whole_tree_even_what_ignores_sigterm(tmp_path, marker):
    supervisor = start(tmp_path, marker, sleep=600)
    wait_until(lambda: marked(marker))
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=30)
    assert gone(marker)          # before the supervisor itself exits


def test_a_sigkilled_runner_takes_the_whole_tree_with_it(tmp_path, marker):
    """The runner stand-in starts the supervisor and is SIGKILLed: the death signal reaches the
    supervisor, which kills the worker and the child that escaped it."""
    runner = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time, os
subprocess.Popen([sys.executable, "-I", {str(SUPERVISOR)!r}, "--parent", str(os.getpid()),
                  "--log", {str(tmp_path / "worker.log")!r}, "--head", "100", "--tail", "100",
                  "--", sys.executable, "-c", {WORKER!r}, {marker!r}, "1", "600", "0"],
                 start_new_session=True)
time.sleep(600)
"""])
    wait_until(lambda: marked(marker))
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    wait_until(lambda: gone(marker), 10)


def test_a_supervisor_whose_runner_is_already_gone_starts_nothing(tmp_path, marker):
    dead = subprocess.Popen(["true"])
    dead.wait()
    supervisor = start(tmp_path, marker, parent=dead.pid)
    assert supervisor.wait(timeout=30) == 128 + signal.SIGTERM
    time.sleep(0.5)
    assert marked(marker) == []


def test_a_flood_keeps_the_head_and_the_tail_of_the_log(tmp_path, marker):
    supervisor = start(tmp_path, marker, lines=50_000, head=2000, tail=3000)   # ~5 MB
    assert supervisor.wait(timeout=60) == 0
    log = (tmp_path / "worker.log").read_bytes()
    assert len(log) < 2000 + 3000 + 300
    assert log.startswith(b"line 0 ")
    assert log.rstrip().endswith(b"x" * 90) and b"line 49999 " in log
    assert b"[runner: output cut here:" in log


# --- the capped log on its own ---------------------------------------------------------------------

def test_capped_log_keeps_what_fits_unchanged(tmp_path):
    path = tmp_path / "log"
    log = CappedLog(path, head=100, tail=100)
    log.write(b"a" * 60)
    log.write(b"b" * 40)
    log.close()
    assert path.read_bytes() == b"a" * 60 + b"b" * 40


def test_capped_log_cuts_the_middle_and_says_how_much(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"[runner: a note before]\n")
    log = CappedLog(path, head=10, tail=20)
    data = bytes(range(256)) * 40                 # 10 240 bytes in chunks of odd sizes
    for start in range(0, len(data), 333):
        log.write(data[start:start + 333])
        assert path.stat().st_size < 24 + 10 + 2 * 20 + 200   # never more than head + 2 × tail
    log.close()
    text = path.read_bytes()
    assert text.startswith(b"[runner: a note before]\n" + data[:10])
    assert text.endswith(data[-20:])
    note = text[24 + 10:-20].decode()
    cut = len(data) - 30
    assert f"{cut} bytes left out" in note and "the first 10 and the last 20 bytes" in note


# --- the worker's environment ----------------------------------------------------------------------

HOST = {"HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C", "PATH": "/usr/bin",
        "CUDA_VISIBLE_DEVICES": "1", "NVIDIA_VISIBLE_DEVICES": "all", "AWS_SECRET_ACCESS_KEY": "s",
        "RAY_AUTH_TOKEN": "t", "XLA_FLAGS": "--host", "OMP_NUM_THREADS": "4",
        "PYTHONPATH": "/host/lib", "LD_PRELOAD": "/host/lib.so", "VIRTUAL_ENV": "/host/venv",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}


def test_workers_start_from_the_stated_host_variables_only():
    env = local.worker_environment({}, {}, environ=HOST)
    passed = ("HOME", "LANG", "LC_ALL", "PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
              "NVIDIA_VISIBLE_DEVICES")
    assert {k: env[k] for k in passed} == {k: HOST[k] for k in passed}
    for secret in ("AWS_SECRET_ACCESS_KEY", "RAY_AUTH_TOKEN", "XLA_FLAGS", "OMP_NUM_THREADS",
                   "LD_PRELOAD", "VIRTUAL_ENV"):
        assert secret not in env
    assert env["PYTHONPATH"] == str(local.REPO_ROOT) and env["PYTHONSAFEPATH"] == "1"


def test_inherit_env_names_more_host_variables():
    names = local.inherited_names({settings.INHERIT_ENV: "XLA_FLAGS, OMP_*"})
    env = local.worker_environment({}, {}, names, environ=HOST)
    assert env["XLA_FLAGS"] == "--host" and env["OMP_NUM_THREADS"] == "4"
    assert "AWS_SECRET_ACCESS_KEY" not in env


@pytest.mark.parametrize("value", ["A B", "1X", "X;Y", "*"])
def test_a_bad_inherit_env_is_one_line(value):
    with pytest.raises(UsageError, match=settings.INHERIT_ENV):
        local.inherited_names({settings.INHERIT_ENV: value})


def test_the_matrix_env_never_overrides_the_runners_own_variables():
    matrix_env = {"PATH": "/evil", "LD_PRELOAD": "/evil.so", "PYTHONPATH": "/evil",
                  "PYTHONHOME": "/evil", "PYTHONSTARTUP": "/evil.py", "XLA_FLAGS": "--cell",
                  "CUDA_VISIBLE_DEVICES": "7"}
    runner_env = {"CUDA_VISIBLE_DEVICES": "GPU-abc", settings.WORKER_ID: "w1"}
    env = local.worker_environment(matrix_env, runner_env, environ=HOST)
    assert env["PATH"] == "/usr/bin"                       # the host's, as the runner has it
    assert env["PYTHONPATH"] == str(local.REPO_ROOT)
    for key in ("LD_PRELOAD", "PYTHONHOME", "PYTHONSTARTUP"):
        assert key not in env
    assert env["XLA_FLAGS"] == "--cell"                    # the cell's own variables pass
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-abc"        # the lane's pin wins
    assert env[settings.WORKER_ID] == "w1"


@pytest.mark.parametrize("value", ["0", "-1", "x", "nan", "inf"])
def test_bad_log_caps_are_one_line(value):
    with pytest.raises(UsageError, match=settings.LOG_TAIL_MB):
        local.log_caps({settings.LOG_TAIL_MB: value})


def test_log_caps_default_and_setting():
    assert local.log_caps({}) == (2**20, 4 * 2**20)
    assert local.log_caps({settings.LOG_HEAD_MB: "0.5", settings.LOG_TAIL_MB: "2"}) == (2**19, 2**21)


def test_the_local_executor_forks_no_python_code_before_exec():
    """preexec_fn would run Python in the forked child while lane threads exist (not
    async-signal-safe): the executor starts its supervisor without one."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(local))
    keywords = {k.arg for node in ast.walk(tree) if isinstance(node, ast.Call)
                for k in node.keywords}
    assert "preexec_fn" not in keywords


def test_the_inherited_variables_reach_the_records_metadata(monkeypatch, tmp_path):
    """What DL_BENCH_INHERIT_ENV passes is recorded (metadata inherited_env, a comparability
    key); the variables every worker inherits (HOME, PATH, ...) are not."""
    assert local.inherited_values({**HOST, settings.INHERIT_ENV: "XLA_FLAGS, OMP_*"}) == {
        "OMP_NUM_THREADS": "4", "XLA_FLAGS": "--host"}
    assert local.inherited_values(HOST) == {}
    monkeypatch.setenv(settings.INHERIT_ENV, "OMP_*")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    executor = local.LocalExecutor()
    prepared = executor.prepare(Source.of(None, python=sys.executable), lambda line: None)
    assert prepared.metadata["inherited_env"] == {"OMP_NUM_THREADS": "3"}
    monkeypatch.delenv(settings.INHERIT_ENV)
    assert "inherited_env" not in local.LocalExecutor().prepare(
        Source.of(None, python=sys.executable), lambda line: None).metadata
