"""The GPU check (benchmarks/gpu_check/), on a machine without a GPU: its dry run end to end
against a stand-in for the lent machine's interpreter (a folder whose bin/python3 is this
test's Python, as the lent machine's python3 is a virtual environment's), its parts sized by
the runner's own plan (`plan --json`) and chosen in priority order to fit the budget, the
carried wheels' list against the locks and the runner's dependencies, what OUT may hold, and
the figures of real runs (a profiled run, a tuning and both tiers, on NumPy) as the summary
shows them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from runner import cli
from runner.paths import REPO_ROOT
from tests.fixtures import FIXTURE_RUNS
from tests.matrices import matrix_text, this_interpreter

CHECK_DIR = REPO_ROOT / "benchmarks" / "gpu_check"
RUN_SH = CHECK_DIR / "run.sh"
# The first call of a loan (docs/gpu-check.md): what has never run on a GPU comes first.
FIRST = ["nvml", "profiles", "quantized"]


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
context = load("context")
environment = load("environment")
figures = load("figures")
summary = load("summary")
part_mod = load("part")
harness_parts = load("harness_parts")
tuned_part = load("tuned_part")
parts_mod = load("parts")
check = load("check")


def stand_in(folder: Path) -> Path:
    """A stand-in for the lent machine's interpreter folder: bin/python3 runs this Python."""
    python = folder / "machine" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return python


def dry_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    done = subprocess.run([str(RUN_SH), str(out), "--dry-run", "--python",
                           str(stand_in(tmp_path)), "--work", str(tmp_path / "work"),
                           "--wheels", str(tmp_path / "no-wheels"), *args],
                          capture_output=True, text=True, timeout=600)
    return done, out


@pytest.fixture(scope="module")
def first_call(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The dry run of a loan's first call: every part planned, those that fit 9 minutes kept."""
    tmp_path = tmp_path_factory.mktemp("first-call")
    done, out = dry_run(tmp_path, "--minutes", "9")
    return done, out, tmp_path


def test_the_first_call_keeps_what_never_ran_on_a_gpu_and_whatever_else_fits(first_call):
    done, out, tmp_path = first_call
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads((out / "summary.json").read_text())
    parts = {p["name"]: p for p in found["parts"]}
    assert parts["set-up"]["status"] == "ok"
    assert "not fetched" in parts["set-up"]["detail"]       # said, not hidden
    kept = [name for name, p in parts.items() if p["status"] == "planned"]
    order = [p.name for p in parts_mod.PARTS]
    assert kept[:3] == FIRST
    # In priority order, each part is kept when its estimate fits what the parts before it left.
    room = found["budget_s"] - context.SETUP_S - context.PACK_S
    for name in order:
        assert parts[name]["status"] == ("planned" if parts[name]["estimate_s"] <= room
                                         else "dropped"), name
        room -= parts[name]["estimate_s"] if parts[name]["status"] == "planned" else 0
    dropped = [name for name in order if parts[name]["status"] == "dropped"]
    assert dropped and found["next_parts"] == dropped
    assert f"next call: benchmarks/gpu_check/run.sh OUT --parts {','.join(dropped)}" \
        in done.stdout
    # Every matrix was planned by the runner itself, with the cells the check expects, the
    # dropped parts' too (a matrix mistake fails the dry run whatever the budget).
    assert parts["matmul"]["figures"]["planned"] == [
        "matmul-run-torch-b1-n=8192", "matmul-run-torch-b1-bfloat16-n=8192",
        "matmul-run-jax-b1-n=8192", "matmul-run-jax-b1-bfloat16-n=8192",
        "matmul-run-torch-b1-n=16384", "matmul-run-torch-b1-bfloat16-n=16384",
        "matmul-run-jax-b1-n=16384", "matmul-run-jax-b1-bfloat16-n=16384"]  # the peak's
    assert parts["profiles"]["figures"]["planned"] == [
        "matmul-run-torch-b1-bfloat16-n=8192", "matmul-run-jax-b1-bfloat16-n=8192",
        "gemma-generate-keras-jax-b32-bfloat16-size=small",
        "gemma-generate-keras-torch-b32-bfloat16-size=small",
        "gemma-generate-hf-b32-bfloat16-size=small"]
    assert "5 profiled" in parts["profiles"]["detail"]
    # torchao's int4 and float8 need CUDA: on this CPU planned not applicable, and said.
    assert "on a GPU also gemma-generate-hf-b32-int4_from_bfloat16-size=small, " \
           "gemma-generate-hf-b32-float8_from_bfloat16-size=small" in parts["quantized"]["detail"]
    assert "3 tuned once `runner tune` has run" in parts["tuned"]["detail"]
    assert [len(parts[name]["figures"]["planned"]) for name in
            ("layers", "layers-2", "layers-3")] == [8, 8, 8]    # 2 layers × 4 environments
    assert {c.split("-b")[0] for c in parts["keras-table"]["figures"]["planned"]} == {
        "bert-fit-keras-jax", "bert-fit-keras-torch", "bert-fit-hf",
        "gemma-generate-keras-jax", "gemma-generate-keras-torch", "gemma-generate-hf"}
    log = (out / "check.log").read_text()
    assert log.count("-m runner plan") == len(parts_mod.queries(parts_mod.PARTS))
    # A runner part's estimate is the runner's own plan of it, with the runner's fixed cost.
    matmul = subprocess.run([sys.executable, "-m", "runner", "plan", "--json",
                             str(tmp_path / "work" / "matrices" / "matmul.toml"), "--profile",
                             "full", "--results-dir", str(tmp_path / "work" / "runs")],
                            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    runner_s = json.loads(matmul.stdout)["estimate"]["seconds"]["expected"]
    assert parts["matmul"]["estimate_s"] == pytest.approx(part_mod.RUN_FIXED_S + runner_s)
    # A tuned part: the tuning's budget per cell, then both tiers (the tuned cells, planned
    # "not applicable" before the tuning, as long as their defaults twins).
    defaults = subprocess.run([sys.executable, "-m", "runner", "plan", "--json",
                               str(tmp_path / "work" / "matrices" / "tuned.toml"), "--only",
                               "cnn-fit-", "--profile", "full", "--results-dir",
                               str(tmp_path / "work" / "runs")],
                              capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    defaults_s = json.loads(defaults.stdout)["estimate"]["seconds"]["expected"]
    assert parts["tuned"]["figures"]["planned"] == [
        "cnn-fit-keras-jax-b128", "cnn-fit-keras-torch-b128", "cnn-fit-torch-b128"]
    assert parts["tuned"]["estimate_s"] == pytest.approx(
        2 * part_mod.RUN_FIXED_S + 3 * tuned_part.BUDGET_MINUTES["full"] * 60 + 2 * defaults_s)
    # What comes back: few plain files with plain names, none too big.
    assert out_folder.check_out_folder(out) == []
    assert {p.name for p in out.iterdir()} <= set(out_folder.OUT_FILES)
    assert "GPU check (dry run, profile full)" in done.stdout


def test_the_next_call_runs_the_parts_it_names(tmp_path):
    done, out = dry_run(tmp_path, "--minutes", "3", "--parts", "profiles-cnn,tuned,pytest-gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    parts = json.loads((out / "summary.json").read_text())["parts"]
    # in PARTS' order, whatever --parts' order: pytest-gpu comes before profiles-cnn there
    assert [(p["name"], p["status"]) for p in parts[1:-1]] == [
        ("pytest-gpu", "planned"), ("profiles-cnn", "planned"), ("tuned", "dropped")]


def test_too_few_minutes_stop_in_one_line(tmp_path):
    done, out = dry_run(tmp_path, "--minutes", "0.3", "--parts", "nvml")
    assert done.returncode == 2
    assert "is too little: the shortest part alone needs about" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_folder_of_other_files_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    done, _ = dry_run(tmp_path)
    assert done.returncode == 2 and "files the check does not write (notes.txt)" in done.stderr
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_an_unknown_part_is_named(tmp_path):
    done, _ = dry_run(tmp_path, "--parts", "quantised")
    assert done.returncode == 2 and "--parts: no part quantised" in done.stderr


# --- the carried wheels ---------------------------------------------------------------------

def test_the_shipped_wheel_list_is_complete_hashed_and_small():
    wheels = carried_wheels.read_wheel_list(carried_wheels.WHEEL_LIST)
    assert carried_wheels.check_wheel_list(wheels) == []
    assert sum(w.size for w in wheels) <= 40 * 2**20
    names = {w.name for w in wheels}
    assert {"keras", "keras-hub", "pydantic", "sqlalchemy", "alembic", "ruptures"} <= names


def wheel(name: str, version: str, size: int = 1000, tag: str = "py3-none-any") -> carried_wheels.Wheel:
    return carried_wheels.Wheel(name, version, "0" * 64, f"{name}-{version}-{tag}.whl", size)


def test_a_wheel_list_that_strays_from_the_locks_or_the_runner_is_caught(monkeypatch):
    shipped = carried_wheels.read_wheel_list(carried_wheels.WHEEL_LIST)
    keras = next(w for w in shipped if w.name == "keras")
    others = [w for w in shipped if w.name != "keras"]
    older = others + [wheel("keras", "3.0.0")]
    assert any("keras==3.0.0 but images/torch/requirements-cuda.lock pins "
               f"{keras.version}" in p for p in carried_wheels.check_wheel_list(older))
    no_hash = others + [carried_wheels.Wheel("keras", keras.version, None, None, None)]
    assert any("has no hash" in p for p in carried_wheels.check_wheel_list(no_hash))
    huge = others + [wheel("keras", keras.version, size=41 * 2**20)]
    assert any("more than 40.0 MiB" in p for p in carried_wheels.check_wheel_list(huge))
    py311 = others + [wheel("keras", keras.version, tag="cp311-cp311-manylinux_2_17_x86_64")]
    assert any("not for the list's Python (cp312)" in p for p in carried_wheels.check_wheel_list(py311))
    monkeypatch.setattr(carried_wheels, "host_dependencies", lambda: ["rich", "left-behind"])
    assert any("the runner needs left-behind" in p for p in carried_wheels.check_wheel_list(shipped))


def test_the_wheel_folder_must_hold_the_listed_files_with_their_hashes(tmp_path):
    good = tmp_path / "good-1.0-py3-none-any.whl"
    good.write_bytes(b"wheel")
    listed = [carried_wheels.Wheel("good", "1.0", carried_wheels.sha256(good), good.name, 5)]
    assert carried_wheels.check_wheel_folder(listed, tmp_path) == []
    (tmp_path / "stray-2.0-py3-none-any.whl").write_bytes(b"x")
    good.write_bytes(b"tampered")
    problems = carried_wheels.check_wheel_folder(listed, tmp_path)
    assert any("its sha256 is not the list's" in p for p in problems)
    assert any("stray-2.0-py3-none-any.whl is not in the list" in p for p in problems)


def test_a_malformed_or_doubled_list_line_is_named(tmp_path):
    listing = tmp_path / "wheels.txt"
    listing.write_text("keras==1.0\nkeras==2.0\n")
    with pytest.raises(carried_wheels.CheckError, match="keras listed twice"):
        carried_wheels.read_wheel_list(listing)
    listing.write_text("# a comment\nkeras>=1.0\n")
    with pytest.raises(carried_wheels.CheckError, match="line 2: not `name==version"):
        carried_wheels.read_wheel_list(listing)


# --- what comes back ------------------------------------------------------------------------

def test_the_archive_leaves_out_plots_then_traces_then_logs_to_fit(tmp_path):
    runs = tmp_path / "runs" / "m" / "20261127T000000Z"
    for relative, size in (("cells/a-r1.json", 100), ("summary.csv", 100),
                           ("plots/big.png", 6000), ("logs/a-r1.log", 3000),
                           ("profiles/a/trace.json.gz", 2000), ("profiles/a/kernels.json", 100),
                           ("work/a-profile/result.json", 2000)):
        path = runs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(range(256)) * (size // 256) if relative.endswith(".csv") else
                         os.urandom(size))
    archive = tmp_path / "runs.tar.gz"
    assert out_folder.pack_runs(tmp_path / "runs", archive, limit=1 << 20) == "nothing"
    assert out_folder.pack_runs(tmp_path / "runs", archive, limit=8000) == "plots and report.html"
    assert out_folder.pack_runs(tmp_path / "runs", archive, limit=5000) == "profile traces"
    assert out_folder.pack_runs(tmp_path / "runs", archive, limit=2500) == "logs"
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["runs/m/20261127T000000Z/cells/a-r1.json",
                                          "runs/m/20261127T000000Z/profiles/a/kernels.json",
                                          "runs/m/20261127T000000Z/summary.csv"]


def test_out_limits_are_checked(tmp_path):
    for i in range(9):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "bad name.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    problems = out_folder.check_out_folder(tmp_path)
    assert any("11 entries" in p for p in problems)
    assert any("'bad name.txt'" in p for p in problems)
    assert any("sub: not a plain file" in p for p in problems)


# --- the summary of a run ----------------------------------------------------------------

def test_a_run_folders_figures_and_their_screen(tmp_path, capsys):
    """summary.py on a recorded run (its report written by the runner): each cell's row of
    summary.csv, the records on the GPU, the one screen the check prints."""
    run = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", run)
    assert cli.main(["report", str(run)]) == 0
    capsys.readouterr()
    found = figures.run_figures(run, on_gpu=True)
    # the recorded run has one failed cell: named with its error, a problem of the part
    assert found["problems"] == ["matmul-run-keras-tensorflow-b1: failed RuntimeError: "
                                 "fixture failure"]
    assert found["records"] == found["records_on_gpu"] > 0
    assert found["clock_events"] == ["hw_thermal_slowdown", "sync_boost"]
    assert {row["status"] for row in found["cells"]} == {"ok", "failed", "not_applicable"}
    assert "profiles" not in found and "keras_tax" not in found and "tiers" not in found
    ctx = context.Context(out=tmp_path, work=tmp_path, python="python3", wheels=tmp_path,
                          wheel_list=tmp_path, profile="full", dry_run=False, budget_s=480)
    outcome = context.Outcome("cnn", "ok", 80.0, 79.0, "", found)
    lines = summary.summary_lines(ctx, [outcome])
    assert lines[1].startswith("[     ok] cnn              79 s (est. 80 s)")
    assert lines[-1].strip() == (f"{found['records']} of {found['records']} records on "
                                 "the GPU; clock events: hw_thermal_slowdown, sync_boost")
    assert any(" ms" in line for line in lines[2:-1])
    (run / "summary.csv").unlink()
    assert figures.run_figures(run, on_gpu=True)["problems"] == ["no summary.csv in base"]


def runner(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner", *map(str, args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def tuned_and_profiled(tmp_path_factory) -> dict:
    """A real tuning and run of both tiers, every cell profiled, as the check's tuned and
    profiles parts leave them: the selftest workload (whose selftest_speed knob halves its
    step) on two NumPy environments (one row: a gap between them)."""
    folder = tmp_path_factory.mktemp("figures")
    matrix, results = folder / "m.toml", folder / "runs"
    matrix.write_text(matrix_text(
        "gc-figures", repeats=1, steps=6, settle=0,
        tables={"tuning": {"budget_minutes": 0.5, "window": 0.1},
                "profiling": {"cells": ["*"]}},
        environments={"numpy": this_interpreter(), "numpy-b": this_interpreter()},
        benchmarks=[{"workload": "selftest", "options": {"sleep_ms": 8.0}, "batch_size": 4,
                     "tier": ["defaults", "tuned"]}]), encoding="utf-8")
    tuned = runner("tune", matrix, "--results-dir", results, "--only", "selftest-run-numpy-b4")
    ran = runner(matrix, "--results-dir", results)
    ctx = context.Context(out=folder, work=folder, python="python3", wheels=folder,
                          wheel_list=folder, profile="full", dry_run=False, budget_s=480)
    run = part_mod.newest_run(ctx, "gc-figures")
    return {"tuned": tuned, "ran": ran, "run": run, "root": results / "gc-figures"}


@pytest.mark.slow
def test_the_figures_of_a_tuning_both_tiers_and_profiles(tuned_and_profiled):
    """figures.py on what the runner wrote: the tuning folder beside the run is no run; the
    tuned.toml knobs and every probe; defaults against tuned; each profile and the row's gap;
    and the lines the summary shows of them."""
    tuned, ran, run = (tuned_and_profiled[k] for k in ("tuned", "ran", "run"))
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert run is not None and run.parent.name == "gc-figures" and run.name != "tuning"
    found = figures.run_figures(run, on_gpu=False)
    assert found["problems"] == []
    ids = {row["cell_name"]: row["cell_id"] for row in found["cells"]}
    (tuning,) = figures.tuning_figures(tuned_and_profiled["root"], ids)
    assert tuning["cell"] == "selftest-run-numpy-b4-sleep_ms=8.0"
    assert tuning["knobs"] == {"selftest_speed": 0.5} and tuning["status"] == "tuned"
    assert len(tuning["tried"]) == tuning["probes"] > 1
    assert {p["status"] for p in tuning["tried"]} >= {"ok", "oom"}
    gains = {t["cell"]: t for t in found["tiers"]}
    numpy = gains["selftest-run-numpy-b4-sleep_ms=8.0"]
    assert 1.5 < numpy["gain"] < 2.5 and numpy["status"] == "ok"       # the step was halved
    # numpy-b was not tuned (--only): its tuned cell not applicable, no gain
    assert gains["selftest-run-numpy-b-b4-sleep_ms=8.0"]["gain"] is None
    profiles = {p["cell"]: p for p in found["profiles"]}
    assert len(profiles) == 3 and {p["device"] for p in profiles.values()} == {"cpu"}
    assert all(p["status"] == "ok" and p["launches"] for p in profiles.values())
    (gap,) = [g for g in found["gaps"] if "row" in g and "tier" not in g["row"]]
    assert {gap["slow"], gap["fast"]} == {"numpy", "numpy-b"} and gap["ratio"] >= 1.0
    ctx = context.Context(out=run, work=run, python="python3", wheels=run, wheel_list=run,
                          profile="full", dry_run=False, budget_s=480)
    lines = summary.summary_lines(ctx, [context.Outcome("tuned", "ok", 60.0, 50.0, "", {
        **found, "tuning": [tuning]})])
    text = "\n".join(lines)
    assert "tuned selftest-run-numpy-b4-sleep_ms=8.0: selftest_speed=0.5 (tuned;" in text
    assert "tiers selftest-run-numpy-b4-sleep_ms=8.0: defaults" in text
    assert "profile selftest-run-numpy-b4-sleep_ms=8.0: ok" in text and "gap " in text


def test_the_keras_tax_pairs_each_keras_layer_with_the_native_one_of_its_engine():
    def row(env: str, api: str, backend: str | None, layer: str, ms: str, status="ok"):
        return {"cell_name": f"layer-forward-{env}-b8-bfloat16-layer={layer}",
                "environment": env, "api": api, "backend": backend, "workload": "layer",
                "status": status, "geomean_ms": ms}
    rows = [row("keras-jax", "keras", "jax", "dense", "2.0"), row("jax", "jax", None, "dense", "1.0"),
            row("keras-torch", "keras", "torch", "dense", "3.0"),
            row("torch", "torch", None, "dense", "1.0"),
            row("keras-torch", "keras", "torch", "lstm", "9.0"),
            row("torch", "torch", None, "lstm", "", status="failed"),
            row("keras-jax", "keras", "jax", "lstm", "4.0"), row("jax", "jax", None, "lstm", "5.0")]
    taxes = figures.keras_tax(rows)
    assert [(t["keras"], t["row"].split("layer=")[1], t["tax"]) for t in taxes] == [
        ("keras-torch", "dense", 3.0), ("keras-jax", "dense", 2.0), ("keras-jax", "lstm", 0.8)]


def test_expected_not_applicable_cells_are_the_checks_own_making():
    cpu, gpu = {"flavour": "cpu"}, {"flavour": "cuda"}
    no_gpu = {"not_applicable": "torchao's float8 … (device = \"auto\", and this run has no GPU)"}
    assert parts_mod.expected_na(cpu, no_gpu) and not parts_mod.expected_na(gpu, no_gpu)
    assert parts_mod.expected_na(gpu, {"not_applicable": "no tuning of cnn-fit-torch-b128 …"})
    assert parts_mod.expected_na(gpu, {"not_applicable": "benchmarks[1] runs under the smoke "
                                                         "profile only"})
    assert not parts_mod.expected_na(cpu, {"not_applicable": "Keras 2 has no RMSNormalization"})


def test_a_fresh_runs_folder_keeps_the_history_of_earlier_calls_and_loans(tmp_path):
    runs, carried = tmp_path / "runs", tmp_path / "whl" / "history.sqlite"
    (runs / "m" / "20261127T000000Z").mkdir(parents=True)
    check.fresh_runs(runs, carried)                   # nothing carried, nothing before
    assert list(runs.iterdir()) == []
    carried.parent.mkdir()
    carried.write_bytes(b"an earlier loan's")
    check.fresh_runs(runs, carried)                   # a loan's first call starts from it
    assert (runs / "history.sqlite").read_bytes() == b"an earlier loan's"
    (runs / "history.sqlite").write_bytes(b"an earlier loan's and this call's")
    (runs / "m" / "20261128T000000Z").mkdir(parents=True)
    check.fresh_runs(runs, carried)                   # the next call keeps the machine's own
    assert [p.name for p in runs.iterdir()] == ["history.sqlite"]
    assert (runs / "history.sqlite").read_bytes() == b"an earlier loan's and this call's"


def test_pytest_gpu_fails_on_a_skip_for_want_of_a_gpu_not_of_a_second_one():
    """The H200 of 2026-11-28 passed both gpu tests and skipped the two-GPU one and Ray's; the
    part called that a failure. A skip for want of any GPU is still one."""
    harness = load("harness_parts")
    h200 = ["SKIPPED [1] tests/executors/test_ray.py:35: Ray is not installed",
            "SKIPPED [1] tests/worker/test_data_parallel_gpu.py:44: needs two NVIDIA GPUs "
            "(NVML found fewer)"]
    assert not [line for line in h200 if harness.NO_GPU_SKIP.search(line)]
    assert harness.NO_GPU_SKIP.search("SKIPPED [1] tests/worker/test_monitor.py:219: needs an "
                                      "NVIDIA GPU (NVML found none)")
