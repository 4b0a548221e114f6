"""What decides whether two numbers may be compared: a cell's id holds the worker's environment
variables and the cell's method version (a digest of the worker code it runs and the timing
method: tests/test_version.py); every record names it, the manifest and every record name the
runner's version; --resume refuses a run of another runner version. (How compare pairs and marks
such cells: tests/results/analysis/test_compare.py.)"""

from __future__ import annotations

import json
from typing import Any

from runner.results.analysis.comparability import COMPARABILITY_KEYS, differences
from runner.schema import matrix as matrix_mod
from runner.version import method_version, runner_version
from runner.worker.metadata import KEYS
from tests.matrices import matrix_text, this_interpreter

WORKER_ENV = {"XLA_FLAGS": "--xla_gpu_autotune_level=0"}


def selftest_matrix(here: dict | None = None, **run_settings: Any) -> str:
    """One selftest cell on this interpreter, with WORKER_ENV unless `here` says otherwise."""
    return matrix_text("versioned", steps=4, timeout=120, **run_settings,
                       environments={"here": here or this_interpreter(env=WORKER_ENV)},
                       benchmarks=[{"workload": "selftest",
                                    "options": {"behaviour": "ok", "sleep_ms": 1}}])


SELFTEST = selftest_matrix()


def ids(write_matrix, text: str) -> list[str]:
    return [c.id for c in matrix_mod.load(write_matrix(text, with_environments=False)).cells]


def test_the_cell_id_holds_the_worker_env_and_the_method_version(write_matrix, monkeypatch):
    base = ids(write_matrix, SELFTEST)
    assert ids(write_matrix, SELFTEST) == base                       # stable
    no_flags = selftest_matrix(this_interpreter())
    assert ids(write_matrix, no_flags) != base                        # XLA flags
    on_demand = selftest_matrix(preallocate=False)
    assert ids(write_matrix, on_demand) != base                       # preallocation switches
    monkeypatch.setattr(matrix_mod, "method_version", lambda *_: "0123456789ab")
    assert ids(write_matrix, SELFTEST) != base                        # another method


def test_the_method_version_decides_comparability_and_the_runner_version_informs():
    assert len(runner_version()) == 12 and int(runner_version(), 16) >= 0
    for key in ("method_version", "worker_env", "gpu_power_limit_w"):
        assert KEYS[key][1] is True, key
    assert KEYS["runner_version"][1] is False
    assert "method_version" in COMPARABILITY_KEYS


def test_records_made_before_method_versions_compare_by_their_runner_version():
    def record(**meta):
        return {"metadata": meta, "status": "ok"}

    old_a, old_b = record(runner_version="aaaaaaaaaaaa"), record(runner_version="aaaaaaaaaaaa")
    assert "method_version" not in differences([old_a], [old_b])        # one old runner
    older = record(runner_version="bbbbbbbbbbbb")
    assert "method_version" in differences([old_a], [older])             # two old runners
    new = record(runner_version="cccccccccccc", method_version="dddddddddddd")
    assert "method_version" in differences([old_a], [new])
    other_runner = record(runner_version="eeeeeeeeeeee", method_version="dddddddddddd")
    assert differences([new], [other_runner]) == {}      # another runner, the same method


def test_records_and_manifest_name_the_versions_and_the_worker_env(write_matrix, run_cli,
                                                                   results_dir):
    code, out, _ = run_cli(write_matrix(SELFTEST, with_environments=False))
    assert code == 0, out
    (run_dir,) = (results_dir / "versioned").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["runner_version"] == runner_version()
    (record,) = [json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")]
    assert record["metadata"]["method_version"] == method_version("numpy", "selftest")
    assert record["metadata"]["runner_version"] == runner_version()
    assert record["metadata"]["worker_env"] == {"XLA_FLAGS": "--xla_gpu_autotune_level=0"}


def test_resume_refuses_a_run_of_another_runner_version_in_one_line(write_matrix, run_cli,
                                                                    results_dir):
    matrix = write_matrix(SELFTEST, with_environments=False)
    assert run_cli(matrix)[0] == 0
    (run_dir,) = (results_dir / "versioned").iterdir()
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    before = sorted(p.name for p in run_dir.rglob("*"))
    for made_by, shown in (("0123456789ab", "0123456789ab"), (None, "(unversioned, older)")):
        if made_by is None:
            manifest.pop("runner_version")           # a run of the old id scheme
        else:
            manifest["runner_version"] = made_by
        manifest_path.write_text(json.dumps(manifest))
        code, _, err = run_cli(matrix, "--resume", str(run_dir))
        assert code == 2
        (line,) = err.strip().splitlines()
        assert f"made by runner version {shown}, this is {runner_version()}" in line
        assert sorted(p.name for p in run_dir.rglob("*")) == before          # nothing written
    manifest["runner_version"] = runner_version()
    manifest_path.write_text(json.dumps(manifest))
    code, out, _ = run_cli(matrix, "--resume", str(run_dir))
    assert code == 0, out
