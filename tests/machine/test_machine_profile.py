"""Machine profiles (runner/machine/profile.py): found by host and GPU, copied into a run's
manifest, and the threshold `compare` takes from them when both runs ran on profiled machines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.executors.kinds import executor_class
from runner.machine import profile as machine_profile
from runner.results.analysis import comparison as compare
from runner.results.render.compare import run_compare
from tests.fixtures import FIXTURE_RUNS



def profile(threshold: float, classes: dict | None = None) -> dict:
    return {"schema": 1, "measured_at": "2026-11-23T10:00:00Z",
            "aa": {"runs": 3, "spread": threshold, "threshold": threshold,
                   "classes": classes or {}}}


def test_the_threshold_an_aa_spread_supports():
    assert machine_profile.supported_threshold(0.0) == 0.01          # never below 1 %
    assert machine_profile.supported_threshold(0.0123) == 0.015       # up to the next 0.5 %
    assert machine_profile.supported_threshold(0.015) == 0.015
    assert machine_profile.supported_threshold(0.31) == pytest.approx(0.31)


def test_profiles_are_keyed_by_host_and_gpu(tmp_path):
    path = machine_profile.path_for(tmp_path, "gpu-vm-7", "NVIDIA A100-SXM4-80GB")
    assert path == tmp_path / "machine-profiles" / "gpu-vm-7-NVIDIA-A100-SXM4-80GB.json"
    assert machine_profile.path_for(tmp_path, "vm", None).name == "vm-cpu.json"


def test_a_run_finds_its_machines_profile(tmp_path, monkeypatch):
    monkeypatch.setattr(machine_profile, "this_machine", lambda: ("vm7", "NVIDIA A100"))
    missing = machine_profile.manifest_entry(tmp_path, executor_class("local"))
    assert missing["found"] is False and missing["why"] == "no machine profile for host vm7 " \
                                                           "(NVIDIA A100)"
    path = machine_profile.path_for(tmp_path, "vm7", "NVIDIA A100")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(profile(0.02, {"cnn": {"spread": 0.031, "threshold": 0.035}})))
    found = machine_profile.manifest_entry(tmp_path, executor_class("local"))
    assert found["found"] and found["threshold"] == 0.02 and found["path"] == str(path)
    assert machine_profile.threshold_for(found, "cnn") == 0.035     # the class's own
    assert machine_profile.threshold_for(found, "bert") == 0.02     # else the machine's
    assert machine_profile.spread_for(found, "cnn") == 0.031
    assert machine_profile.manifest_entry(tmp_path, executor_class("ray"))["found"] is False
    path.write_text("{not json")
    assert machine_profile.manifest_entry(tmp_path, executor_class("local"))["found"] is False


def with_profile(tmp_path: Path, name: str, entry: dict | None) -> Path:
    run = tmp_path / name
    shutil.copytree(FIXTURE_RUNS / name, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["machine_profile"] = entry
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def found(threshold: float) -> dict:
    return {"found": True, "threshold": threshold, "spread": threshold, "classes": {}}


def test_compare_takes_the_profiles_threshold_when_both_runs_have_one(tmp_path):
    """B is A × 1.2: slower at the fixed 5 %, within the noise of a machine whose A/A supports
    25 %."""
    a, b = with_profile(tmp_path, "base", found(0.25)), with_profile(tmp_path, "slower",
                                                                      found(0.10))
    judged = compare.compare_runs(a, b)
    assert judged.threshold == 0.25 and judged.count(compare.SLOWER) == 0
    assert judged.threshold_source.startswith("the machine profiles")
    assert {c.threshold for c in judged.cells if c.threshold is not None} == {0.25}
    given = compare.compare_runs(a, b, threshold=0.05)
    assert given.count(compare.SLOWER) > 0 and given.threshold_source == "--threshold 5 %"


def test_compare_keeps_its_fixed_threshold_and_says_why_without_a_profile(tmp_path, capsys):
    a = with_profile(tmp_path, "base", found(0.25))
    b = with_profile(tmp_path, "slower", {"found": False, "why": "no machine profile"})
    judged = compare.compare_runs(a, b)
    assert judged.threshold == compare.DEFAULT_THRESHOLD and judged.count(compare.SLOWER) > 0
    assert "run B ran on a machine without a profile" in judged.threshold_source
    from rich.console import Console

    run_compare(a, b, None, 0.05, tmp_path / "c.md", Console(width=300))
    out = capsys.readouterr().out
    assert "threshold: the fixed 5 %: run B ran on a machine without a profile" in out
    assert "the fixed 5 %: run B ran on a machine" in (tmp_path / "c.md").read_text()


def test_class_thresholds_apply_per_workload(tmp_path):
    classes = {"cnn": {"spread": 0.3, "threshold": 0.30}}
    entry = {**found(0.02), "classes": classes}
    a, b = with_profile(tmp_path, "base", entry), with_profile(tmp_path, "slower", entry)
    judged = compare.compare_runs(a, b)
    by_workload = {c.cell_name.split("-")[0]: c for c in judged.cells if c.threshold is not None}
    assert by_workload["cnn"].threshold == 0.30 and by_workload["cnn"].verdict == compare.SAME
    assert by_workload["matmul"].threshold == 0.02


def test_the_aa_runs_keep_the_step_cv_of_each_class_and_runs_read_it(tmp_path, monkeypatch):
    from runner.studies import noise

    def run(cv: float, median: float) -> dict:
        return {"matmul-run-numpy-b1": {"status": "ok", "median_ms": median, "workload": "matmul",
                                        "cv": cv, "cv_repeats": 0.01, "warning_groups": {}}}

    aa = noise.aa_spread([run(0.12, 1.0), run(0.31, 1.02), run(0.2, 0.99)], ["a", "b", "c"])
    assert aa["classes"]["matmul"]["cv"] == 0.31 and aa["cv"] == 0.31       # the worst run's
    monkeypatch.setattr(machine_profile, "this_machine", lambda: ("vm7", None))
    path = machine_profile.path_for(tmp_path, "vm7", None)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": 1, "aa": aa}))
    entry = machine_profile.manifest_entry(tmp_path, executor_class("local"))
    assert machine_profile.cv_for(entry, "matmul") == 0.31
    assert machine_profile.cv_for(entry, "cnn") == 0.31                     # the machine's
    path.write_text(json.dumps(profile(0.02)))           # a profile measured before: no CV
    assert machine_profile.cv_for(machine_profile.manifest_entry(
        tmp_path, executor_class("local")), "matmul") is None
