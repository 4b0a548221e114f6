"""The GPU check (benchmarks/gpu_check/), on a machine without a GPU: its dry run end to end
against a stand-in for the lent machine's interpreter (a folder whose bin/python3 is this
test's Python, as the lent machine's python3 is a virtual environment's), the carried wheels'
list against the locks and the runner's dependencies, the budget, and what OUT may hold."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT

CHECK_DIR = REPO_ROOT / "benchmarks" / "gpu_check"
RUN_SH = CHECK_DIR / "run.sh"
# What the issue asks of a machine with 6 minutes left, and what the default 8 minutes hold by
# the estimates of the H200 runs (docs/gpu-check.md: the whole check takes about 13½ minutes).
ESSENTIAL = ["matmul", "overhead", "pytest-gpu"]
AT_DEFAULT = ["matmul", "overhead", "pytest-gpu", "nvml", "keras-table"]


def load(name: str):
    """A module of benchmarks/gpu_check/ (a script folder: its modules import each other)."""
    if str(CHECK_DIR) not in sys.path:
        sys.path.insert(0, str(CHECK_DIR))
    spec = importlib.util.spec_from_file_location(name, CHECK_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module               # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


carried_wheels = load("carried_wheels")
out_folder = load("out_folder")
check = load("check")


@pytest.fixture
def machine_python(tmp_path) -> Path:
    """A stand-in for the lent machine's interpreter folder: bin/python3 runs this Python."""
    python = tmp_path / "machine" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return python


def dry_run(tmp_path: Path, python: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    done = subprocess.run([str(RUN_SH), str(out), "--dry-run", "--python", str(python),
                           "--work", str(tmp_path / "work"), "--wheels",
                           str(tmp_path / "no-wheels"), *args],
                          capture_output=True, text=True, timeout=300)
    return done, out


def test_the_dry_run_plans_the_first_parts_within_the_default_budget(tmp_path, machine_python):
    done, out = dry_run(tmp_path, machine_python)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    parts = {p["name"]: p for p in summary["parts"]}
    assert parts["set-up"]["status"] == "ok"
    assert "not fetched" in parts["set-up"]["detail"]       # said, not hidden
    kept = [name for name, p in parts.items() if p["status"] == "planned"]
    assert kept == AT_DEFAULT
    # The estimate of what is planned, with the set-up and the packing, fits the 8 minutes.
    planned = sum(parts[name]["estimate_s"] for name in kept)
    assert planned + check.SETUP_S + check.PACK_S <= summary["budget_s"] == 8 * 60
    # Every matrix was planned by the runner itself, with the cells the check expects.
    assert parts["matmul"]["figures"]["planned"] == [
        "matmul-run-torch-b1-n=8192", "matmul-run-torch-b1-bfloat16-n=8192",
        "matmul-run-jax-b1-n=8192", "matmul-run-jax-b1-bfloat16-n=8192",
        "matmul-run-torch-b1-n=16384", "matmul-run-torch-b1-bfloat16-n=16384",
        "matmul-run-jax-b1-n=16384", "matmul-run-jax-b1-bfloat16-n=16384"]  # the peak's
    assert {c.split("-b")[0] for c in parts["keras-table"]["figures"]["planned"]} == {
        "bert-fit-keras-jax", "bert-fit-keras-torch", "bert-fit-hf",
        "gemma-generate-keras-jax", "gemma-generate-keras-torch", "gemma-generate-hf"}
    log = (out / "check.log").read_text()
    assert log.count("-m runner plan") == len([p for p in check.PARTS if p.matrix and p.name in kept])
    # What comes back: few plain files with plain names, none too big.
    assert check.check_out_folder(out) == []
    assert {p.name for p in out.iterdir()} <= set(check.OUT_FILES)
    assert "GPU check (dry run, profile full)" in done.stdout


def test_six_minutes_keep_the_matmul_overhead_and_gpu_tests(tmp_path, machine_python):
    done, out = dry_run(tmp_path, machine_python, "--minutes", "6")
    assert done.returncode == 0, done.stdout + done.stderr
    parts = json.loads((out / "summary.json").read_text())["parts"]
    kept = [p["name"] for p in parts if p["status"] == "planned"]
    assert kept[:3] == ESSENTIAL
    dropped = [p["name"] for p in parts if p["status"] == "dropped"]
    assert dropped and dropped == [p.name for p in check.PARTS][-len(dropped):]


def test_fourteen_minutes_plan_every_part(tmp_path, machine_python):
    done, out = dry_run(tmp_path, machine_python, "--minutes", "14")
    assert done.returncode == 0, done.stdout + done.stderr
    parts = json.loads((out / "summary.json").read_text())["parts"]
    assert [p["name"] for p in parts if p["status"] == "planned"] == [p.name for p in check.PARTS]


def test_too_few_minutes_stop_in_one_line(tmp_path, machine_python):
    done, out = dry_run(tmp_path, machine_python, "--minutes", "1")
    assert done.returncode == 2
    assert "is too little: the first part (matmul) alone needs about" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_folder_of_other_files_is_refused(tmp_path, machine_python):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    done, _ = dry_run(tmp_path, machine_python)
    assert done.returncode == 2 and "files the check does not write (notes.txt)" in done.stderr
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


# --- the carried wheels ---------------------------------------------------------------------

def test_the_shipped_wheel_list_is_complete_hashed_and_small():
    wheels = check.read_wheel_list(check.WHEEL_LIST)
    assert check.check_wheel_list(wheels) == []
    assert sum(w.size for w in wheels) <= 40 * 2**20
    names = {w.name for w in wheels}
    assert {"keras", "keras-hub", "pydantic", "sqlalchemy", "alembic", "ruptures"} <= names


def wheel(name: str, version: str, size: int = 1000, tag: str = "py3-none-any") -> check.Wheel:
    return check.Wheel(name, version, "0" * 64, f"{name}-{version}-{tag}.whl", size)


def test_a_wheel_list_that_strays_from_the_locks_or_the_runner_is_caught(monkeypatch):
    shipped = check.read_wheel_list(check.WHEEL_LIST)
    keras = next(w for w in shipped if w.name == "keras")
    others = [w for w in shipped if w.name != "keras"]
    older = others + [wheel("keras", "3.0.0")]
    assert any("keras==3.0.0 but images/torch/requirements-cuda.lock pins "
               f"{keras.version}" in p for p in check.check_wheel_list(older))
    no_hash = others + [check.Wheel("keras", keras.version, None, None, None)]
    assert any("has no hash" in p for p in check.check_wheel_list(no_hash))
    huge = others + [wheel("keras", keras.version, size=41 * 2**20)]
    assert any("more than 40.0 MiB" in p for p in check.check_wheel_list(huge))
    py311 = others + [wheel("keras", keras.version, tag="cp311-cp311-manylinux_2_17_x86_64")]
    assert any("not for the list's Python (cp312)" in p for p in check.check_wheel_list(py311))
    monkeypatch.setattr(carried_wheels, "host_dependencies", lambda: ["rich", "left-behind"])
    assert any("the runner needs left-behind" in p for p in check.check_wheel_list(shipped))


def test_the_wheel_folder_must_hold_the_listed_files_with_their_hashes(tmp_path):
    good = tmp_path / "good-1.0-py3-none-any.whl"
    good.write_bytes(b"wheel")
    listed = [check.Wheel("good", "1.0", carried_wheels.sha256(good), good.name, 5)]
    assert check.check_wheel_folder(listed, tmp_path) == []
    (tmp_path / "stray-2.0-py3-none-any.whl").write_bytes(b"x")
    good.write_bytes(b"tampered")
    problems = check.check_wheel_folder(listed, tmp_path)
    assert any("its sha256 is not the list's" in p for p in problems)
    assert any("stray-2.0-py3-none-any.whl is not in the list" in p for p in problems)


def test_a_malformed_or_doubled_list_line_is_named(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text("keras==1.0\nkeras==2.0\n")
    with pytest.raises(check.CheckError, match="keras listed twice"):
        check.read_wheel_list(listing)
    listing.write_text("# a comment\nkeras>=1.0\n")
    with pytest.raises(check.CheckError, match="line 2: not `name==version"):
        check.read_wheel_list(listing)


# --- what comes back ------------------------------------------------------------------------

def test_the_archive_leaves_out_plots_then_logs_to_fit(tmp_path):
    runs = tmp_path / "runs" / "m" / "20261127T000000Z"
    for relative, size in (("cells/a-r1.json", 100), ("summary.csv", 100),
                           ("plots/big.png", 6000), ("logs/a-r1.log", 3000)):
        path = runs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(range(256)) * (size // 256) if relative.endswith(".csv") else
                         os.urandom(size))
    archive = tmp_path / "runs.tar.gz"
    assert check.pack_runs(tmp_path / "runs", archive, limit=1 << 20) == "nothing"
    assert check.pack_runs(tmp_path / "runs", archive, limit=5000) == "plots and report.html"
    assert check.pack_runs(tmp_path / "runs", archive, limit=2500) == "logs"
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["runs/m/20261127T000000Z/cells/a-r1.json",
                                          "runs/m/20261127T000000Z/summary.csv"]


def test_out_limits_are_checked(tmp_path):
    for i in range(9):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "bad name.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    problems = check.check_out_folder(tmp_path)
    assert any("11 entries" in p for p in problems)
    assert any("'bad name.txt'" in p for p in problems)
    assert any("sub: not a plain file" in p for p in problems)
