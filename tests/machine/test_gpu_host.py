"""The GPU VM path, on a machine without a GPU: only the host boundary is faked (what NVML says
about the machine's GPUs); the executors, environments and frameworks are the real ones.

Checked: the executor choice and its reason, the flavour and the lock each environment uses, the
run's first lines, the no_gpu status of a framework that cannot see the host's GPU (the real CPU
build of torch, device = "auto"), and doctor's verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runner import settings
from runner import cli
from runner.environments import Source
from runner.machine import hostinfo
from runner.run.setup import choose_setup
from tests.matrices import environment, matrix_text, this_interpreter

A100 = {"gpu_count": 1, "gpu_name": "NVIDIA A100-SXM4-40GB", "driver_version": "550.54.15"}
NO_ENGINE = "unix:///nonexistent/docker.sock"


@pytest.fixture
def gpu_host(monkeypatch):
    """This host, as NVML would describe a VM with one A100 (and no Docker engine)."""
    def fake(facts=A100):
        monkeypatch.setattr(hostinfo, "gpu_facts", lambda: dict(facts))
        monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
        monkeypatch.delenv(settings.FLAVOUR, raising=False)
    fake()
    return fake


def gpu_host_matrix(numpy: dict | None = None) -> str:
    """torch and NumPy from their image folders, or `numpy` as the NumPy environment's table."""
    return matrix_text("gpu-host", steps=3, timeout=300, profile=None,
                       environments={"torch": environment("torch"),
                                     "numpy": numpy or environment("numpy")},
                       benchmarks=[{"workload": "matmul", "options": {"n": 32},
                                    "device": ["auto", "cpu"]}])


MATRIX = gpu_host_matrix()


def test_gpu_host_without_engine_runs_local_cuda_stacks(gpu_host, write_matrix):
    from runner.schema import matrix as matrix_mod

    matrix = matrix_mod.load(write_matrix(MATRIX, with_environments=False), gpu_found=True)
    setup = choose_setup(matrix, None)
    assert setup.executor.name == "local"
    assert setup.reason.startswith("auto: a GPU was found, but no Docker engine answers")
    assert setup.flavour.name == "cuda"
    assert setup.would_use(Source("torch")) == ("local", "cuda",
                                               "images/torch/requirements-cuda.lock")
    assert setup.would_use(Source("numpy")) == ("local", "cpu", "images/numpy/requirements.lock")
    setup.close()


def test_no_gpu_host_runs_local_cpu_stacks(gpu_host, write_matrix):
    gpu_host({})
    setup = choose_setup(None, None)
    assert (setup.executor.name, setup.flavour.name) == ("local", "cpu")
    assert setup.reason == "auto: no GPU found, so no Docker images are needed"
    assert setup.would_use(Source("torch"))[2] == "images/torch/requirements.lock"


def test_existing_interpreters_run_locally_under_any_executor(gpu_host):
    setup = choose_setup(None, "docker")
    assert setup.executor.name == "docker"
    python = Source(python=sys.executable)
    assert setup.would_use(python) == ("local", None, f"python {sys.executable}")
    assert setup.would_use(Source("jax"))[:2] == ("docker", "cuda")
    setup.close()


def test_the_first_lines_say_executor_flavour_and_locks(gpu_host, write_matrix, run_cli):
    code, out, _ = run_cli("plan", write_matrix(MATRIX, with_environments=False))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("profile: full (auto: a GPU was found)")
    assert lines[1].startswith("executor: local (auto: a GPU was found, but no Docker engine answers")
    assert lines[2] == "flavour: cuda (1 × NVIDIA A100-SXM4-40GB found)"
    table = "".join(ch for ch in out if ch not in "│ \n")     # undo the table's folding
    # Every environment runs local (the executor line says so): no executor column; the
    # flavours differ (NumPy has no CUDA lock), so each row names its own.
    assert "torchtorchcudaimages/torch/requirements-cuda.lock" in table
    assert "numpynumpycpuimages/numpy/requirements.lock" in table


def test_the_flavour_override_is_announced(gpu_host, write_matrix, run_cli, monkeypatch):
    monkeypatch.setenv(settings.FLAVOUR, "cpu")
    code, out, _ = run_cli("plan", write_matrix(MATRIX, with_environments=False))
    assert code == 0 and "flavour: cpu (DL_BENCH_FLAVOUR=cpu)" in out
    assert "requirements-cuda.lock" not in out


@pytest.mark.slow
def test_a_framework_that_cannot_see_the_hosts_gpu_fails_as_no_gpu(gpu_host, write_matrix,
                                                                     run_cli, monkeypatch,
                                                                     results_dir):
    """The real CPU build of torch on a host that has a GPU: device = "auto" must not quietly
    measure the CPU. NumPy (a CPU baseline) and device = "cpu" cells still run."""
    monkeypatch.setenv(settings.FLAVOUR, "cpu")   # the cached CPU stack, on a GPU host
    code, out, _ = run_cli(write_matrix(MATRIX, with_environments=False))
    assert code == 1
    records = {}
    for path in results_dir.glob("gpu-host/*/cells/*.json"):
        record = json.loads(path.read_text())
        records[(record["environment"], record["device"])] = record
    assert records[("torch", "auto")]["status"] == "no_gpu"
    assert "sees no GPU in this environment although the host has one" in \
        records[("torch", "auto")]["error"]
    assert records[("torch", "cpu")]["status"] == "ok"
    assert records[("torch", "cpu")]["effective"]["device"] == "cpu"
    assert records[("numpy", "auto")]["status"] == "ok"
    assert records[("numpy", "auto")]["effective"]["device"] == "cpu"


# --- doctor ------------------------------------------------------------------------------------------

def doctor(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["doctor", *map(str, args)])
    return code, capsys.readouterr().out


def test_doctor_on_a_gpu_vm_without_docker_takes_the_local_path(gpu_host, capsys, write_matrix):
    code, out = doctor(capsys, write_matrix(MATRIX, with_environments=False))
    assert code == 0, out
    assert "✓ GPUs: 1 × NVIDIA A100-SXM4-40GB" in out
    assert "✓ driver: driver 550.54.15: CUDA 12 ok" in out
    assert "– Docker engine" in out                    # shown, not fatal: local serves
    assert "executor: local (auto: a GPU was found, but no Docker engine answers" in out
    assert "flavour: cuda" in out


def test_doctor_fails_when_the_driver_is_too_old_for_the_cuda_locks(gpu_host, capsys,
                                                                     write_matrix):
    gpu_host({**A100, "driver_version": "470.82.01"})
    code, out = doctor(capsys, write_matrix(MATRIX, with_environments=False))
    assert code == 1
    assert "✗ driver: driver 470.82.01 is older than images/torch/requirements-cuda.lock need " \
           "(CUDA 12: >= 525.60.13)" in out
    assert "fix: upgrade the NVIDIA driver to >= 525.60.13" in out


def test_doctor_fails_when_docker_is_required_but_absent(gpu_host, capsys, write_matrix):
    code, out = doctor(capsys, write_matrix(MATRIX, with_environments=False),
                       "--executor", "docker")
    assert code == 1
    assert "✗ Docker engine" in out and "fix: install Docker" in out


def test_doctor_without_gpu_or_engine_passes_on_the_cpu_path(gpu_host, capsys, write_matrix):
    gpu_host({})
    code, out = doctor(capsys, write_matrix(MATRIX, with_environments=False))
    assert code == 0, out
    assert "– GPUs: no NVIDIA GPU" in out and "flavour: cpu (no NVIDIA GPU found)" in out


def test_doctor_checks_existing_interpreters(gpu_host, capsys, write_matrix, tmp_path):
    gpu_host({})
    text = gpu_host_matrix({"python": str(tmp_path / "gone" / "python"), "api": "numpy"})
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "python").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "gone" / "python").chmod(0o755)
    code, out = doctor(capsys, write_matrix(text, with_environments=False))
    assert code == 1
    assert "✗ interpreter: python = " in out and "exited 1" in out


def test_cuda_needs_are_read_from_the_locks():
    from runner.machine.checks import cuda_majors
    from runner.environments import lock_path

    assert cuda_majors(lock_path("torch", "cuda")) == {12}
    assert cuda_majors(lock_path("jax", "cuda")) == {12}
    assert cuda_majors(lock_path("torch", "cpu")) == set()


def test_doctor_names_a_bad_matrix_in_one_line(capsys, tmp_path):
    code = cli.main(["doctor", str(tmp_path / "missing.toml")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().endswith("missing.toml: no such file")
    assert len(err.strip().splitlines()) == 1


def test_python_and_image_are_exclusive(write_matrix, run_cli, tmp_path):
    both = gpu_host_matrix(environment("numpy", python=sys.executable))
    code, _, err = run_cli("plan", write_matrix(both, with_environments=False))
    assert code == 2 and "environments.numpy: give image" in err
    missing = gpu_host_matrix({"python": str(tmp_path / "no-python"), "api": "numpy"})
    code, _, err = run_cli("plan", write_matrix(missing, with_environments=False))
    assert code == 2 and "environments.numpy.python:" in err and "no such file" in err
    assert len(err.strip().splitlines()) == 1


def test_an_existing_interpreter_runs_a_matrix_end_to_end(write_matrix, run_cli, results_dir,
                                                          monkeypatch):
    """The runner's own interpreter (it has NumPy) as an existing environment: nothing is built,
    every record says what was installed and where it came from."""
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: {})
    text = matrix_text("byo", repeats=2, steps=5, profile=None,
                       environments={"numpy-here": this_interpreter()},
                       benchmarks=[{"workload": "matmul", "options": {"n": 32}}])
    code, out, _ = run_cli(write_matrix(text, with_environments=False))
    assert code == 0, out
    run_dir = next(results_dir.glob("byo/*"))
    records = [json.loads(p.read_text()) for p in sorted((run_dir / "cells").glob("*.json"))]
    assert [r["status"] for r in records] == ["ok", "ok"]
    for record in records:
        assert record["image"] is None
        assert record["metadata"]["env_source"] == "existing"
        assert record["metadata"]["python_executable"] == sys.executable
        assert record["distributions"]["numpy"]
        assert record["metadata"]["distributions_sha256"] == \
            records[0]["metadata"]["distributions_sha256"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    entry = manifest["environments"]["numpy-here"]
    assert entry["python"] == sys.executable and entry["uses"] == f"python {sys.executable}"
    assert entry["executor"] == "local" and entry["flavour"] is None
    assert Path(sys.executable).exists()
