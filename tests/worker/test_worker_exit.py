"""The worker's process ends as soon as its result is written (issue 60 item 2): the
interpreter's teardown (the frameworks' atexit handlers and module finalisers: 1-2 s of every
process on this project's 2-core VM) is skipped, its streams flushed first, its exit code kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.paths import REPO_ROOT
from runner.worker.protocol import CellSpec

# The worker as `python -m runner.worker` runs it, with an atexit handler registered first (as a
# framework's import registers its own).
WORKER = """
import atexit, runpy, sys
marker = sys.argv.pop()
atexit.register(lambda: open(marker, "w").close())
sys.argv = ["runner.worker", *sys.argv[1:]]
runpy.run_module("runner.worker", run_name="__main__", alter_sys=True)
"""


def run_worker(tmp_path: Path, spec_path: Path, marker: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WORKER, str(spec_path),
                           str(tmp_path / "result.json"), str(marker)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_the_worker_ends_once_its_result_is_written_without_the_interpreters_teardown(tmp_path):
    spec = CellSpec(run_id="t", cell_id="c", cell_name="c", repeat=1, environment="numpy",
                    api="numpy", backend=None, image="numpy", workload="selftest", task="run",
                    batch_size=1, precision="float32", jit="auto", size="tiny", tf32=None,
                    steps_per_execution=1, data="device", device="cpu",
                    options={"behaviour": "ok", "sleep_ms": 1.0}, steps=2, warmup_steps=1,
                    seed=0, result_path=str(tmp_path / "result.json"))
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec.to_dict()))
    marker = tmp_path / "teardown"
    done = run_worker(tmp_path, spec_path, marker)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "ok"
    assert done.stdout.endswith("runner.worker: c r1: ok\n")     # flushed before the end
    assert not marker.exists()                                   # no teardown ran
    # A spec it cannot read: exit code 2 and its one line, flushed too.
    spec_path.write_text("{")
    done = run_worker(tmp_path, spec_path, marker)
    assert done.returncode == 2 and done.stderr.startswith("runner.worker: cannot read spec ")
    assert not marker.exists()
