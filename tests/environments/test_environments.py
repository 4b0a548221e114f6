"""runner/environments: the flavour decision, lock selection, existing interpreters, and what an
environment holds against its lock."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner import settings
from runner import environments
from runner.environments import (Flavour, Source, decide_flavour, existing, folder_flavour,
                                 installed, lock_path, lock_python, venvs)
from runner.errors import UsageError
from runner.executors.local import probe_environment
from runner.paths import IMAGES_DIR
from runner.worker import distributions


# --- flavour ------------------------------------------------------------------------------------

def test_flavour_is_cuda_exactly_when_a_gpu_is_present(monkeypatch):
    monkeypatch.delenv(settings.FLAVOUR, raising=False)
    assert decide_flavour(0).name == "cpu"
    assert "no NVIDIA GPU" in decide_flavour(0).reason
    chosen = decide_flavour(2, "NVIDIA A100-SXM4-40GB")
    assert chosen.name == "cuda" and chosen.reason == "2 × NVIDIA A100-SXM4-40GB found"


def test_flavour_override_and_its_one_line_error(monkeypatch):
    monkeypatch.setenv(settings.FLAVOUR, "cpu")
    assert decide_flavour(4, "A100") == Flavour("cpu", "DL_BENCH_FLAVOUR=cpu")
    monkeypatch.setenv(settings.FLAVOUR, "gpu")
    with pytest.raises(UsageError, match="DL_BENCH_FLAVOUR='gpu': expected one of cpu, cuda"):
        decide_flavour(1)


def test_an_image_without_a_cuda_lock_stays_cpu():
    cuda = Flavour("cuda", "test")
    assert folder_flavour(cuda, "jax") == "cuda"
    assert folder_flavour(cuda, "numpy") == "cpu"       # the CPU baseline has no CUDA lock
    assert folder_flavour(Flavour("cpu", "test"), "jax") == "cpu"


def test_local_environments_are_cached_by_flavour_and_lock(tmp_path):
    cpu, cuda = venvs.env_for("torch", "cpu", tmp_path), venvs.env_for("torch", "cuda", tmp_path)
    assert cpu.lock == IMAGES_DIR / "torch" / "requirements.lock"
    assert cuda.lock == IMAGES_DIR / "torch" / "requirements-cuda.lock"
    assert cpu.path.name == f"torch-cpu-py311-{cpu.lock_sha256[:12]}"
    assert cuda.path.name == f"torch-cuda-py311-{cuda.lock_sha256[:12]}"
    assert cpu.lock_sha256 != cuda.lock_sha256
    with pytest.raises(venvs.EnvironmentBuildError, match="requirements-cuda.lock is missing"):
        venvs.env_for("numpy", "cuda", tmp_path)


def test_venvs_are_made_with_the_locks_python():
    assert lock_python(lock_path("jax", "cuda")) == "3.11"      # from the uv header
    assert lock_python(lock_path("numpy", "cpu")) == environments.LOCK_PYTHON
    env = venvs.env_for("numpy", "cpu")
    command = venvs.venv_command(env)
    assert command[command.index("--python") + 1] == "3.11"


def test_source_keys():
    assert Source(folder="jax").key == "jax" and not Source(folder="jax").existing
    assert Source(python="/opt/py/bin/python").key == "python:/opt/py/bin/python"


# --- existing interpreters -------------------------------------------------------------------------

PROBE_ENV = probe_environment()     # what the local executor asks an interpreter with


def test_probe_an_existing_interpreter():
    found = existing.probe(sys.executable, PROBE_ENV)
    assert found.version.startswith(f"{sys.version_info.major}.{sys.version_info.minor}")


def test_probe_refuses_what_cannot_serve(tmp_path):
    with pytest.raises(existing.InterpreterError, match="no such interpreter"):
        existing.probe(str(tmp_path / "nope"), PROBE_ENV)
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho 'Python 2.7.18' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(existing.InterpreterError, match="exited 3: Python 2.7.18"):
        existing.probe(str(script), PROBE_ENV)


def test_probe_reads_a_bounded_answer_within_its_timeout(tmp_path):
    """An interpreter that floods or hangs costs neither memory nor the run: it is killed."""
    flood = tmp_path / "flood-python"
    flood.write_text("#!/bin/sh\nexec yes 'not a version'\n")
    flood.chmod(0o755)
    with pytest.raises(existing.InterpreterError, match="printed more than"):
        existing.probe(str(flood), PROBE_ENV)
    marker = tmp_path / "still-running"
    hang = tmp_path / "hang-python"
    hang.write_text(f"#!/bin/sh\nsleep 30\ntouch {marker}\n")
    hang.chmod(0o755)
    with pytest.raises(existing.InterpreterError, match="did not answer in 1 s"):
        existing.probe(str(hang), PROBE_ENV, timeout=1)
    done = existing.run_bounded([sys.executable, "-c", "print('x' * 10)"], timeout=30, limit=11)
    assert done.returncode == 0 and done.stdout == "x" * 10 + "\n"


# --- what an environment holds ---------------------------------------------------------------------

def test_lock_pins_read_every_pinned_line():
    pins = installed.lock_pins(lock_path("torch", "cpu"))
    assert pins["torch"] == "2.13.0+cpu"
    assert pins["keras-hub"] == "0.32.0"          # canonical names
    assert all("#" not in v and "\\" not in v for v in pins.values())


def test_differences_name_every_kind_of_drift():
    pins = {"numpy": "2.4.6", "psutil": "7.0.0", "nvidia-ml-py": "13.615.71"}
    found = {"numpy": "2.4.6", "psutil": "7.1.0", "pip": "25.0", "requests": "2.32.0"}
    assert installed.differences(pins, found) == [
        "nvidia-ml-py missing (lock: 13.615.71)", "psutil 7.1.0 (lock: 7.0.0)",
        "requests 2.32.0 installed, not in the lock"]
    assert installed.differences(pins, {**pins, "pip": "25.0", "setuptools": "80"}) == []


def test_differences_leave_out_what_the_venv_seeded_unless_the_lock_pins_it():
    pins = {"numpy": "2.4.6", "typing-extensions": "4.0"}
    found = {"numpy": "2.4.6", "packaging": "26.3", "typing-extensions": "4.1"}
    assert installed.differences(pins, found) == [
        "packaging 26.3 installed, not in the lock", "typing-extensions 4.1 (lock: 4.0)"]
    seed = {"packaging", "typing-extensions"}
    assert installed.differences(pins, found, seed) == ["typing-extensions 4.1 (lock: 4.0)"]


def test_the_runners_own_interpreter_lists_its_distributions():
    """The same code the worker records with, run by an interpreter as the host runs it."""
    found = installed.list_installed(Path(sys.executable))
    assert found["numpy"] and found["rich"]
    assert distributions.RUNNER_DISTRIBUTION not in found     # the runner is not the environment
    assert distributions.digest(found) == distributions.digest(dict(reversed(found.items())))
    assert json.dumps(found)  # plain JSON for the record


@pytest.mark.slow
def test_a_lock_built_environment_matches_its_lock_and_a_changed_one_warns():
    from runner.executors.local import LocalExecutor

    env = venvs.build("numpy", "cpu")
    assert LocalExecutor.check_installed(env) == []
    pins = installed.lock_pins(env.lock)
    drifted = {**installed.list_installed(env.python), "numpy": "1.0.0"}
    assert installed.differences(pins, drifted, venvs.seed_of(env)) == [
        f"numpy 1.0.0 (lock: {pins['numpy']})"]


BUILD = """
import json, sys
from pathlib import Path
from runner.environments import venvs
lines = []
env = venvs.build("numpy", "cpu", Path(sys.argv[1]), lines.append)
waited = any("another run is building" in line for line in lines)
print(json.dumps({"waited": waited, "built": len(lines) > int(waited)}))
"""


@pytest.mark.slow
def test_two_runs_building_one_lock_at_once_share_one_build_with_no_false_drift(tmp_path):
    """A fresh environment wanted by two processes at once (both start while a third holds the
    folder's lock): one builds it, the other waits and then uses it; the venv's own seed
    packages (packaging, via wheel) are no drift."""
    from runner.executors.local import LocalExecutor

    env = venvs.env_for("numpy", "cpu", tmp_path)
    tmp_path.mkdir(exist_ok=True)
    with venvs.build_lock(env, lambda line: None):
        runs = [subprocess.Popen([sys.executable, "-c", BUILD, str(tmp_path)], text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                for _ in range(2)]
        time.sleep(3)                   # both are waiting for the lock by now
    said = []
    for run in runs:
        output, _ = run.communicate(timeout=600)
        assert run.returncode == 0, output
        said.append(json.loads(output.strip().splitlines()[-1]))
    assert all(s["waited"] for s in said)
    assert sorted(s["built"] for s in said) == [False, True]        # one build, one reuse
    assert venvs.is_built(env)
    assert LocalExecutor.check_installed(env) == []
    assert "packaging" in venvs.seed_of(env)
    (env.path / venvs.SEED_FILE).unlink()          # as an environment built before the record
    assert LocalExecutor.check_installed(env) == []
    assert "packaging" in json.loads((env.path / venvs.SEED_FILE).read_text())
    # Its packages' bytecode is compiled (workers write none: PYTHONDONTWRITEBYTECODE) ...
    cache = next(env.path.glob("lib/python*/site-packages")) / "numpy" / "__pycache__"
    tag = sys.implementation.cache_tag                  # the lock's Python is this one's, 3.11
    assert venvs.has_bytecode(env) and (cache / f"__init__.{tag}.pyc").is_file()
    # ... and an environment built before that is compiled once, the next time it is used.
    (env.path / venvs.BYTECODE_FILE).unlink()
    shutil.rmtree(cache)
    lines: list[str] = []
    assert venvs.build("numpy", "cpu", tmp_path, lines.append) == env
    assert lines == [f"compiling {env.path.name}'s packages to bytecode (once)"]
    assert venvs.has_bytecode(env) and (cache / f"__init__.{tag}.pyc").is_file()
    assert LocalExecutor.check_installed(env) == []
