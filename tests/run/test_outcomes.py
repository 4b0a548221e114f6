"""Failures never stop a run: a failing cell, a crashing worker and a hanging cell are recorded
with their reasons while the others complete; an interrupted run resumes without losing or
repeating a finished cell. Uses the NumPy environment and the diagnostic `selftest` workload."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from tests.matrices import environment, matrix_text


pytestmark = pytest.mark.slow

# What write_matrix declares unless told otherwise; the cells run on NumPy.
ENVIRONMENTS = ["numpy", "keras-jax"]
OUTCOMES = matrix_text("outcomes", steps=3, timeout=20, environments=ENVIRONMENTS, benchmarks=[
    {"workload": "selftest", "environments": ["numpy"],
     "options": {"behaviour": "ok", "sleep_ms": 5}},
    {"workload": "selftest", "environments": ["numpy"], "options": {"behaviour": "fail"}},
    {"workload": "selftest", "environments": ["numpy"], "options": {"behaviour": "crash"}},
    {"workload": "selftest", "environments": ["numpy"], "options": {"behaviour": "hang"},
     "timeout": 4}])


def records_by_behaviour(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        out[record["options"]["behaviour"]] = record
    return out


def only_run(results_dir: Path) -> Path:
    runs = [p for p in results_dir.glob("*/*") if (p / "manifest.json").exists()]
    assert len(runs) == 1
    return runs[0]


def test_failed_crashed_and_timed_out_cells_are_recorded_and_the_rest_completes(
        write_matrix, run_cli, results_dir):
    code, out, _ = run_cli(write_matrix(OUTCOMES, with_environments=False))
    assert code == 1  # some cells failed
    run_dir = only_run(results_dir)
    records = records_by_behaviour(run_dir)
    assert records["ok"]["status"] == "ok" and len(records["ok"]["samples_ms"]) == 3
    assert all(s >= 5 for s in records["ok"]["samples_ms"])
    assert records["fail"]["status"] == "failed"
    assert "selftest: deliberate failure" in records["fail"]["error"]
    assert records["crash"]["status"] == "crashed"
    assert "signal 9" in records["crash"]["error"]
    assert records["hang"]["status"] == "timeout"
    assert 4 <= records["hang"]["wall_s"] < 15
    for record in records.values():
        assert (run_dir / record["log"]).is_file()
    report = (run_dir / "report.md").read_text()
    assert "deliberate failure" in report and "timeout" in report
    for behaviour in ("ok", "fail", "crash", "hang"):  # options make rows of their own
        assert f"selftest (run) [behaviour={behaviour}" in report
    summary = (run_dir / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 4


def resumable(repeats: int = 2) -> str:
    return matrix_text("resumable", repeats=repeats, steps=4, timeout=60,
                       environments=ENVIRONMENTS,
                       benchmarks=[{"workload": "selftest", "environments": ["numpy"],
                                    "options": {"behaviour": "ok",
                                                "sleep_ms": [150, 151, 152]}}])


def start_runner(matrix: Path, results_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", str(matrix), "--results-dir", str(results_dir), *extra],
        cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        # A shell's background job ignores SIGINT and its children inherit that; the runner
        # must see Ctrl-C as a user's terminal delivers it, however the tests were started.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_records(results_dir: Path, count: int, limit_s: float = 120) -> Path:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        runs = list(results_dir.glob("*/*/cells"))
        if runs and len([p for p in runs[0].glob("*.json") if not p.name.startswith(".")]) >= count:
            return runs[0].parent
        time.sleep(0.05)
    raise AssertionError("the runner wrote no records in time")


def worker_processes(run_dir: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "runner.worker" in line and str(run_dir) in line]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupted_run_resumes_without_loss_or_repeats(write_matrix, results_dir, sig):
    matrix = write_matrix(resumable(), with_environments=False)
    runner = start_runner(matrix, results_dir)
    run_dir = wait_for_records(results_dir, 2)
    runner.send_signal(sig)
    output, _ = runner.communicate(timeout=60)
    assert runner.returncode == (130 if sig == signal.SIGINT else -signal.SIGKILL), output
    time.sleep(0.5)
    assert worker_processes(run_dir) == []  # the worker went with the runner
    before = {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}
    assert 2 <= len(before) < 6

    resumed = start_runner(matrix, results_dir, "--resume", str(run_dir))
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    after = {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}
    assert len(after) == 6  # 3 cells × 2 repeats, each exactly once
    for name, content in before.items():
        assert after[name] == content  # finished records untouched
    keys = sorted(after)
    assert keys == sorted({f"{json.loads(c)['cell_id']}-r{json.loads(c)['repeat']}.json"
                           for c in after.values()})
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["status"] == "ok" for line in lines)


def test_resume_without_folder_takes_the_latest_run(write_matrix, run_cli, results_dir):
    matrix = write_matrix(resumable(), with_environments=False)
    code, _, _ = run_cli(matrix, "--only", "sleep_ms=150")
    first = only_run(results_dir)
    assert code == 0 and len(list((first / "cells").glob("*.json"))) == 2
    code, out, _ = run_cli(matrix, "--resume")
    assert code == 0
    assert len(list((first / "cells").glob("*.json"))) == 6
    assert len([p for p in results_dir.glob("*/*")]) == 1


def test_resume_adopts_a_result_the_runner_did_not_store(write_matrix, run_cli, results_dir):
    """The runner died after its worker wrote result.json but before the record was stored:
    --resume stores that measurement instead of running the cell again."""
    matrix = write_matrix(resumable(repeats=1), with_environments=False)
    code, _, _ = run_cli(matrix, "--only", "sleep_ms=150")
    run_dir = only_run(results_dir)
    (record_path,) = [p for p in (run_dir / "cells").glob("*.json")]
    original = json.loads(record_path.read_text())
    record_path.unlink()  # as if the runner had been killed just before storing it
    code, _, _ = run_cli(matrix, "--resume", run_dir, "--only", "sleep_ms=150")
    assert code == 0
    adopted = json.loads(record_path.read_text())
    assert adopted["samples_ms"] == original["samples_ms"]
    assert adopted["extra"]["adopted_after_interrupt"] is True
    # the host's metadata (lock hash, ...) as for a measured record, so pooling sees one setup
    assert adopted["metadata"]["lock_sha256"] == original["metadata"]["lock_sha256"]


GPU_GIVEN = matrix_text(
    "gpu-given", steps=2, timeout=120,
    environments={"jax": environment("jax", env={"DL_BENCH_GPU_GIVEN": "1", "JAX_PLATFORMS": ""}),
                  "torch": environment("torch", env={"DL_BENCH_GPU_GIVEN": "1"})},
    benchmarks=[{"workload": "matmul", "environments": ["*"], "options": {"n": 8}}])


def test_a_gpu_the_framework_cannot_see_fails_the_cell_instead_of_running_on_the_cpu(
        write_matrix, run_cli, results_dir):
    """What the Docker executor sets when it hands a container a GPU: with device = "auto" a
    framework that sees none (a CPU build here) must fail the cell, not measure the CPU."""
    code, _, _ = run_cli(write_matrix(GPU_GIVEN, with_environments=False))
    assert code == 1
    records = [json.loads(p.read_text()) for p in (only_run(results_dir) / "cells").glob("*.json")]
    assert {r["environment"] for r in records} == {"jax", "torch"}
    for record in records:
        assert record["status"] == "no_gpu" and not record["samples_ms"]
        assert "sees no GPU in this environment although the host has one" in record["error"]
