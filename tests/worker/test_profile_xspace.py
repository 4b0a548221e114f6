"""TensorFlow's profile (an XSpace protobuf) converted to Chrome trace events by the worker's
converter (runner/worker/profiling/xspace.py), with the reader TensorFlow's own wheel carries, on
a committed tiny profile: three `dl_bench_step` steps of a 256² tf.function matmul + tanh + add
on a CPU (tests/fixtures/profiles/tf-matmul.xplane.pb)."""

from __future__ import annotations

import json
import subprocess

import pytest

from runner.environments import venvs
from runner.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "profiles" / "tf-matmul.xplane.pb"
SCRIPT = """
import json, sys
from pathlib import Path
from runner.worker.profiling import reduce, xspace
events = xspace.events_of(xspace.read_xspace(Path(sys.argv[1])))
print(json.dumps({"events": events, "table": reduce.reduce_trace(events, source="tf.profiler")}))
"""


@pytest.mark.slow
def test_an_xspace_becomes_a_chrome_trace_and_a_table():
    python = venvs.build("tensorflow").python
    done = subprocess.run([str(python), "-c", SCRIPT, str(FIXTURE)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    events = out["events"]
    processes = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert "/host:CPU" in processes
    assert all({"ph", "pid", "name"} <= set(e) for e in events)
    complete = [e for e in events if e["ph"] == "X"]
    assert all(e["ts"] > 0 and e["dur"] >= 0 for e in complete)
    steps = [e for e in complete if e["name"] == "dl_bench_step"]
    assert sorted(e["args"]["step_num"] for e in steps) == [0, 1, 2]
    kernel = next(e for e in complete if e["name"] == "matmul:_MklMatMul")
    assert kernel["args"]["op_type"] == "_MklMatMul" and kernel["args"]["tf_op"] == kernel["name"]
    table = out["table"]
    assert table["steps"] == 3 and table["device"] == "cpu"
    rows = {r["name"]: r for r in table["rows"]}
    assert rows["_MklMatMul"]["category"] == "gemm" and rows["_MklMatMul"]["count_per_step"] == 1
    assert {"Tanh", "AddV2"} <= set(rows)
