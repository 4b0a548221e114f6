"""The machine profile's cache of calibrated peaks: kept per machine and environment lock, a
failed calibration never cached, another lock another entry; a second run on the same machine
and locks reuses the peak (and its estimate knows), --recalibrate measures it again."""

from __future__ import annotations

import json

from runner.environments import Flavour, Source
from runner.machine.peak_cache import PeakCache
from runner.run.cells import source_identity
from runner.run.setup import Setup
from tests.matrices import matrix_text


class Flavoured:
    flavour = Flavour("cpu", "test")


def record(status: str = "ok", wall: float = 4.0) -> dict:
    return {"status": status, "achieved_tflops": 0.1, "wall_s": wall, "extra": {}}


def test_a_peak_is_kept_per_machine_and_lock(tmp_path):
    cache = PeakCache(tmp_path, "vm-1", "NVIDIA A100-SXM4-80GB")
    assert cache.path.name == "vm-1-NVIDIA-A100-SXM4-80GB-peaks.json"
    cache.put("lock:aaa", "cell1", record(), "run/1")
    cache.put("lock:aaa", "cell2", record("failed"), "run/1")       # never cached
    cache.put(None, "cell1", record(), "run/1")                      # no lock: never cached
    again = PeakCache(tmp_path, "vm-1", "NVIDIA A100-SXM4-80GB")
    found = again.get("lock:aaa", "cell1")
    assert found["record"]["achieved_tflops"] == 0.1 and found["run_id"] == "run/1"
    assert again.get("lock:aaa", "cell2") is None
    assert again.get("lock:bbb", "cell1") is None                    # a changed lock
    assert again.get(None, "cell1") is None
    assert again.last_wall_s("cell1") == 4.0
    assert PeakCache(tmp_path, "vm-2", None).get("lock:aaa", "cell1") is None   # another VM


def test_a_damaged_cache_is_no_cache(tmp_path):
    cache = PeakCache(tmp_path, "vm", None)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text("{not json", encoding="utf-8")
    assert cache.get("lock:a", "c") is None
    cache.put("lock:a", "c", record(), "r")
    assert json.loads(cache.path.read_text())["peaks"]


def test_the_identity_follows_the_locks_content(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.2.0 --hash=sha256:aa\n", encoding="utf-8")
    setup = Setup(Flavoured(), "test")                               # type: ignore[arg-type]
    source = Source(folder="numpy", lock=str(lock))
    first = source_identity(setup, source)
    lock.write_text("numpy==2.2.1 --hash=sha256:bb\n", encoding="utf-8")
    assert first is not None and source_identity(setup, source) not in (None, first)
    assert source_identity(setup, Source(python="/usr/bin/python3")) is None
    reference = "registry.example/jax@sha256:" + "a" * 64
    assert source_identity(setup, Source(reference=reference)) == reference


MATRIX = matrix_text("peaks", steps=2, profile="smoke", calibrate=True,
                     tables={"profiles": {"smoke": {"size": "tiny"}}},
                     benchmarks=[{"workload": "selftest", "environments": ["numpy"]}])


def test_the_next_run_on_this_machine_reuses_the_peak_unless_asked(tmp_path, run_cli,
                                                                   results_dir):
    matrix = tmp_path / "peaks.toml"
    matrix.write_text(MATRIX, encoding="utf-8")
    code, out, err = run_cli(matrix)
    assert code == 0, out + err
    assert "✓ calibration: 1 peak(s) in 1 environment(s)" in out
    code, out, err = run_cli(matrix)
    assert code == 0, out + err
    assert "calibration 0 s [1 cached]" in out                    # the estimate knew
    assert "✓ calibration: 1 cached peak(s) reused from " in out
    latest = sorted((results_dir / "peaks").iterdir())[-1]
    manifest = json.loads((latest / "manifest.json").read_text())
    assert manifest["calibration"]["cache"]["reused"] == 1 and manifest["calibration"]["peaks"]
    cached = json.loads(next((latest / "calibration").glob("*.json")).read_text())
    first = sorted((results_dir / "peaks").iterdir())[0].name
    assert cached["extra"]["peak_cache"]["run_id"] == f"peaks/{first}"
    assert cached["run_id"] == f"peaks/{latest.name}"
    code, out, err = run_cli(matrix, "--recalibrate")
    assert code == 0, out + err
    assert "✓ calibration: 1 peak(s) in 1 environment(s)" in out and "reused" not in out
