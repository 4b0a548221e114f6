"""The profiled pass measures the profiler (issue 59 item 4): before the profiler starts and
after it ends, the same `warmup + steps` calls run unprofiled in the same process, synchronised
alike (after every call), and the profiled steps are set against those. Before, `profile_overhead` divided the
profiled step by the cell's timed median, which mixed the per-call synchronisation against the
timed blocks, another process's noise and the profiler (0.71–2.22 on this project's VM)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runner.paths import REPO_ROOT
from runner.run.profiles import profiler_cost

SLEEP_MS, STEPS, WARMUP = 4.0, 4, 1


def profiled_selftest(tmp_path) -> dict:
    result_path = tmp_path / "result.json"
    spec = {"run_id": "t/profile", "cell_id": "prof000000", "cell_name": "selftest-run-numpy",
            "repeat": 0, "environment": "numpy", "api": "numpy", "backend": None,
            "image": "numpy", "workload": "selftest", "task": "run", "batch_size": 1,
            "precision": "float32", "jit": False, "size": "full", "tf32": None,
            "steps_per_execution": 1, "data": "arrays", "device": "cpu",
            "options": {"behaviour": "ok", "sleep_ms": SLEEP_MS}, "steps": 4, "warmup_steps": 1,
            "seed": 0, "result_path": str(result_path),
            "profile_pass": {"steps": STEPS, "warmup": WARMUP, "activities": ["cpu"],
                             "record_shapes": False, "with_stack": False, "max_trace_mb": 8.0}}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    done = subprocess.run([sys.executable, "-P", "-m", "runner.worker", str(spec_path),
                           str(result_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(result_path.read_text(encoding="utf-8"))
    assert result["status"] == "ok", result["error"]
    return result["profile"]


def test_the_profiled_steps_are_set_against_the_same_steps_unprofiled(tmp_path):
    captured = profiled_selftest(tmp_path)
    reference = captured["reference_step_ms"]
    assert len(captured["step_ms"]) == STEPS and len(reference) == 2 * STEPS
    assert reference == captured["reference_before_ms"] + captured["reference_after_ms"]
    assert all(SLEEP_MS * 0.9 < ms < SLEEP_MS * 5 for ms in reference)   # slept, unprofiled
    assert "every call synchronised" in captured["sync"]
    profiled, unprofiled, overhead = profiler_cost(captured)
    assert profiled == captured["profiled_step_ms"]
    assert overhead == pytest.approx(profiled / unprofiled)
    assert 0.5 < overhead < 2.0          # cProfile around one sleep call costs microseconds


def test_a_worker_without_a_reference_gives_no_ratio():
    """A profile of an older worker (no reference steps): no ratio, rather than one against
    the timed repeats' other regime."""
    assert profiler_cost({"profiled_step_ms": 2.0}) == (2.0, None, None)
    assert profiler_cost({"profiled_step_ms": 2.0, "reference_step_ms": ["x", -1]})[2] is None
