"""Trust on a shared machine, end to end through the real runner (NumPy cells in the cached
environment, the local executor, real worker processes):

- on this machine's CPU: a run with a CPU hog started beside it (real busy processes, killed
  after) says in its report that something else was running; `doctor --measure` runs its A/A
  here, prints the threshold and writes the machine profile, which the next runs find and
  `compare` uses;
- on a faked NVML host (hostinfo's facts and gpustate.open_gpu faked, everything else real):
  a hot GPU is waited for and the cell says it could not settle; clocks locked for the run and
  reset after, recorded in the manifest and every record; a refusal is one line, exit 2, nothing
  written. The real NVML paths are not verified here (no GPU).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pynvml
import pytest

from runner import settings
from runner import cli
from runner.machine import gpustate, hostinfo
from runner.worker.monitor import Nvml
from tests.machine.test_gpustate import TDP, FakeGpu
from tests.matrices import matrix_text

MATMUL = {"workload": "matmul", "options": {"n": 64}}


def write(tmp_path: Path, name: str = "noise", benchmarks: Sequence[dict] = (MATMUL,),
          **run_settings: Any) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(matrix_text(name, repeats=2, min_time=0.3, **run_settings,
                                benchmarks=benchmarks), encoding="utf-8")
    return path


def run_folder(results_dir: Path, name: str) -> Path:
    (folder,) = sorted((results_dir / name).iterdir())[-1:]
    return folder


def records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "cells").glob("*.json"))]


# --- this machine's CPU -----------------------------------------------------------------------

@pytest.fixture
def cpu_hog():
    """One busy process per CPU, started before the run and killed after it."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)]
    yield hogs
    for hog in hogs:
        hog.kill()
        hog.wait()


@pytest.mark.slow
def test_a_run_beside_a_cpu_hog_says_something_else_was_running(tmp_path, run_cli, results_dir,
                                                                   cpu_hog):
    code, out, err = run_cli(write(tmp_path))
    assert code == 0, out + err
    folder = run_folder(results_dir, "noise")
    loads = [r["host_other_cpu"] for r in records(folder)]
    assert all(load["share"] > 0.3 for load in loads), loads   # the hogs' cores, at least
    report = (folder / "report.md").read_text()
    section = report.split("### Something else was running")[1].split("\n#")[0]
    # The machine's load is one line for every cell it touched (report's warnings, grouped).
    assert "- Other processes using the host's CPU, " in section
    assert "`matmul-run-numpy-b1-n=64` (other processes used" in section
    assert "of the host's CPU time during r1's timed window" in section


@pytest.mark.slow
def test_the_aa_measure_runs_here_prints_a_threshold_and_runs_use_it(tmp_path, run_cli,
                                                                      results_dir, monkeypatch,
                                                                      capsys):
    from runner.machine import profile as machine_profile

    monkeypatch.setattr(machine_profile, "this_machine", lambda: ("test-vm", None))
    matrix = write(tmp_path, benchmarks=[MATMUL, {"workload": "elementwise", "options": {"n": 4096}}])
    code, out, err = run_cli("doctor", matrix, "--measure", "--runs", "2", "--detect", "10")
    assert code == 0, out + err
    assert "to detect a 10 % change with 80 % power in matmul" in out.replace("\n", " ")
    print(out)                      # the measure's own output, for the record
    assert "overhead:" in out and "numpy: clock ÷ bare loop" in out
    assert "A/A: 2 cell(s) × 2 repeat(s), run 2 times as separate runs" in out
    assert "compare threshold this machine supports:" in out
    path = results_dir / "machine-profiles" / "test-vm-cpu.json"
    profile = json.loads(path.read_text())
    assert set(profile["aa"]["classes"]) == {"matmul", "elementwise"}
    assert profile["aa"]["threshold"] >= machine_profile.MIN_THRESHOLD
    assert profile["overhead"][0]["ratio"] > 0 and profile["gpus"] == []
    assert len(profile["aa"]["run_dirs"]) == 2 and all(Path(d).is_dir()
                                                       for d in profile["aa"]["run_dirs"])

    # The next runs on this machine find the profile; compare takes its threshold.
    for _ in range(2):
        code, out, err = run_cli(matrix)
        assert code == 0 and "machine profile:" in out, out + err
    first, second = sorted((results_dir / "noise").iterdir())
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["machine_profile"]["found"] and \
        manifest["machine_profile"]["threshold"] == profile["aa"]["threshold"]
    cli.main(["compare", str(first), str(second)])
    assert "threshold: the machine profiles" in capsys.readouterr().out.replace("\n", " ")


# --- a faked NVML host --------------------------------------------------------------------------

A100 = {"gpu_count": 1, "gpu_name": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54.15",
        "gpus": [{"index": 0, "uuid": "GPU-fake-0", "name": "NVIDIA A100-SXM4-80GB"}]}


@pytest.fixture
def fake_gpu_host(monkeypatch):
    """This host as NVML would describe a VM with one A100 (no Docker engine): the run takes
    the local executor and one GPU lane; gpustate talks to the FakeGpu."""
    def install(**readings) -> FakeGpu:
        fake = FakeGpu(**readings)
        monkeypatch.setattr(hostinfo, "gpu_facts", lambda: dict(A100))
        monkeypatch.setattr(gpustate, "open_gpu", lambda device_id=None: Nvml(fake, handle=device_id))
        return fake
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv(settings.FLAVOUR, raising=False)
    monkeypatch.setattr(gpustate, "_LOCKED", {})
    return install


@pytest.mark.slow
def test_a_hot_gpu_is_waited_for_and_the_cell_says_it_could_not_settle(tmp_path, run_cli,
                                                                         results_dir,
                                                                         fake_gpu_host):
    fake_gpu_host(temps=(78,), process_lists=[[(4242, 2**30)]])
    code, out, err = run_cli(write(tmp_path, settle=1.0, settle_temperature=50))
    assert code == 0, out + err
    folder = run_folder(results_dir, "noise")
    waits = [r["settle"] for r in records(folder)]
    assert all(not w["settled"] and w["start_temp_c"] == 78 and w["waited_s"] >= 1.0
               for w in waits), waits
    assert waits[0]["why"].startswith("1 other compute process(es) on the GPU (pid 4242")
    assert waits[0]["why"].endswith("78 °C > 50 °C")
    section = (folder / "report.md").read_text().split("### The GPU was not quiet")[1]
    # The wait as measured (at least the 1 s asked; a loaded machine's polling may add some).
    waited = re.search(r"r1 started after waiting ([\d.]+) s for a quiet GPU", section)
    assert waited and 1.0 <= float(waited.group(1)) < 30 and "(at 78 °C)" in section, section


@pytest.mark.slow
def test_clocks_are_locked_for_the_run_and_reset_after(tmp_path, run_cli, results_dir,
                                                       fake_gpu_host):
    fake = fake_gpu_host()
    code, out, err = run_cli(write(tmp_path, lock_clocks=True, settle=0))
    assert code == 0, out + err
    assert fake.calls == [("lock", "GPU-fake-0", TDP, TDP), ("reset", "GPU-fake-0")]
    assert "clocks locked (TDP (base) clock) on GPU GPU-fake-0 until the run ends" in \
        out.replace("\n", "")
    folder = run_folder(results_dir, "noise")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["gpu_clocks"]["setting"] == "tdp"
    assert all(r["metadata"]["gpu_locked_clocks"] == "tdp" for r in records(folder))
    assert all(r["settle"] is None for r in records(folder))       # settle = 0: no wait
    assert "GPU clocks were locked at the TDP (base) clock" in (folder / "report.md").read_text()


def test_a_refused_lock_is_one_line_exit_2_and_nothing_written(tmp_path, run_cli, results_dir,
                                                               fake_gpu_host):
    fake = fake_gpu_host(refuse=pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION))
    code, out, err = run_cli(write(tmp_path, lock_clocks=1200))
    assert code == 2
    assert err.count("\n") == 1 and "Insufficient Permissions" in err and "needs root" in err
    assert list(results_dir.iterdir()) == [] and fake.calls == []


def test_lock_clocks_takes_a_boolean_or_a_clock(tmp_path, run_cli, results_dir):
    code, _, err = run_cli(write(tmp_path, lock_clocks="max"))
    assert code == 2 and "run.lock_clocks: expected false, true" in err
    code, _, err = run_cli(write(tmp_path, settle=-1))
    assert code == 2 and "run.settle" in err
    assert list(results_dir.iterdir()) == []


def test_measure_options_need_measure(tmp_path, run_cli):
    code, _, err = run_cli("doctor", write(tmp_path), "--runs", "5")
    assert code == 2 and "go with --measure" in err
    code, _, err = run_cli("doctor", write(tmp_path), "--detect", "2")
    assert code == 2 and "go with --measure" in err


def test_measure_recommends_the_repeats_a_chosen_change_needs():
    """doctor --measure --detect (issue 49 item 6): from the A/A's spread between processes,
    the repeats a side at which the ratio test sees the chosen change with 80 % power."""
    from runner.studies import repeats

    aa = {"classes": {"matmul": {}, "cnn": {}},
          "cells": [{"workload": "matmul", "cv_repeats": 0.02},
                    {"workload": "matmul", "cv_repeats": 0.01},
                    {"workload": "cnn", "cv_repeats": 0.2}]}
    matmul, cnn = repeats.advice(aa, 0.05)
    assert matmul["spread"] == 0.02 and matmul["repeats"] == 5     # the worst cell's spread
    assert matmul["at_3"] == pytest.approx(0.094, abs=0.002)
    assert cnn["repeats"] is None                                  # beyond 100 a side
    (line, _) = repeats.lines(aa, 0.05)
    assert line == ("to detect a 5 % change with 80 % power in matmul (spread between processes "
                    "2.00 %): 5 repeats a side (3 a side detect 9.34 %)")


def test_measure_with_no_matching_cell_is_one_line_and_measures_nothing(tmp_path, run_cli,
                                                                        results_dir):
    code, _, err = run_cli("doctor", write(tmp_path), "--measure", "--only", "nothing-such")
    assert code == 2 and err.count("\n") == 1 and "--only nothing-such: no runnable cell" in err
    assert list(results_dir.iterdir()) == []


def test_measure_reports_the_gpus_state_and_what_can_move_a_measurement(tmp_path,
                                                                          fake_gpu_host):
    """The state lines of doctor --measure on a faked A100: persistence off, a lowered power
    limit, a GPU already hot at idle, another process on it."""
    import io

    from rich.console import Console

    from runner.schema import matrix as matrix_mod
    from runner.studies import noise
    from runner.run.setup import choose_setup

    fake = fake_gpu_host(temps=(66,), power_limit_mw=300_000, process_lists=[[(1, 2**30)]])
    fake.nvmlDeviceGetPersistenceMode = lambda handle: 0
    matrix = matrix_mod.load(write(tmp_path), gpu_found=True)
    setup = choose_setup(matrix, "local")
    states = noise.gpu_states(setup)
    assert [s["gpu"] for s in states] == ["GPU-fake-0"]
    out = io.StringIO()
    noise.show_states(states, matrix, Console(file=out, width=400))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("GPU GPU-fake-0 NVIDIA A100-SXM4-80GB: persistence off · ECC on · "
                               "clocks not held: SM 1410 MHz now, applications 1410 (default "
                               "1410), max 1410; memory 1593 MHz · power limit 300 W (default "
                               "400 W) · idle 66 °C")
    notes = "\n".join(lines[1:])
    assert "persistence mode is off" in notes and "`sudo nvidia-smi -pm 1`" in notes
    assert "power limit 300 W is below its default 400 W" in notes
    assert "1 other compute process(es) on the GPU: pid 1" in notes
    assert "66 °C at idle, above [run] settle_temperature = 60" in notes
