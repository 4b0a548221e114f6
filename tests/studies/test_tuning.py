"""The tuned tier (docs/tuned.md). The search's logic on scripted probes (tuning_search.py:
successive halving, the walk over a large grid, the budget, pruning); the knobs' combinations a
cell can run (catalog/knobs.py); and, end to end on the selftest workload, whose knobs have a
known cost model (selftest_speed halves the step, selftest_greedy runs out of memory above
batch 2, selftest_shortcut computes a different answer): `tune` finds the winner within its
budget, prunes the out-of-memory and the wrong-answer probes with their reasons, resumes
without running a probe again and stops at its budget; the run measures both tiers, applies
the knobs (the record's effective says so) and reports them side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from runner.studies import tuning_search
from runner.studies.tuning_batch import search_batch
from runner.studies.tuning_search import Probe, search
from runner.worker import catalog
from runner.worker.catalog import Knob
from runner.worker.catalog.knobs import applicable, blocked
from tests.matrices import matrix_text, this_interpreter

FAST = Knob("fast", (1.0, 0.5, 0.7), "a cost factor")
BROKEN = Knob("broken", (False, True), "fails when on")


def scripted(costs: dict[str, float], fails: set[str] = frozenset(), wall: float = 1.0):
    """A probe runner whose time per step is the product of each knob value's cost."""
    calls: list[tuple[dict, int, float]] = []

    def run(setting: dict, rung: int, window: float) -> Probe:
        calls.append((dict(setting), rung, window))
        if any(f"{k}={v}" in fails for k, v in setting.items()):
            return Probe(setting, rung, window, "oom", None, wall, "out of memory")
        ms = 10.0
        for name, value in setting.items():
            ms *= costs.get(f"{name}={value}", 1.0)
        return Probe(setting, rung, window, "ok", ms, wall)

    return run, calls


def test_halving_finds_the_fastest_and_compares_the_last_two_at_the_longest_window():
    run, calls = scripted({"fast=0.5": 0.5, "fast=0.7": 0.7})
    outcome = search([FAST], "cpu", lambda s: None, run, budget_s=100.0, window_s=0.5)
    assert outcome.winner is not None and outcome.winner.setting == {"fast": 0.5}
    assert [c[1] for c in calls] == [0, 0, 0, 1, 1]            # 3 at rung 0, the best 2 again
    assert calls[-1][2] == 0.5 * tuning_search.RUNG_GROWTH
    assert outcome.defaults is not None and outcome.defaults.setting == {"fast": 1.0}
    assert not outcome.budget_spent and outcome.spent_s == 5.0


def test_a_pruned_probe_is_never_the_winner():
    run, _ = scripted({"broken=True": 0.1}, fails={"broken=True"})
    outcome = search([BROKEN], "cpu", lambda s: None, run, budget_s=100.0, window_s=0.5)
    assert outcome.winner is not None and outcome.winner.setting == {"broken": False}
    assert [p.status for p in outcome.probes if p.rung == 0] == ["ok", "oom"]


def test_the_budget_stops_before_a_probe_that_would_not_fit():
    run, calls = scripted({"fast=0.5": 0.5, "fast=0.7": 0.7}, wall=10.0)
    outcome = search([FAST], "cpu", lambda s: None, run, budget_s=25.0, window_s=0.5)
    assert outcome.budget_spent and len(calls) == 2 and outcome.spent_s <= 25.0
    assert outcome.winner is not None and outcome.winner.setting == {"fast": 0.5}


def test_a_large_grid_is_walked_knob_by_knob():
    knobs = [Knob(f"k{i}", (0, 1, 2), "a knob") for i in range(3)]      # 27 settings
    run, calls = scripted({"k0=2": 0.5, "k1=1": 0.8, "k2=2": 0.9})
    outcome = search(knobs, "cpu", lambda s: None, run, budget_s=1e9, window_s=0.5)
    walked = [c for c in calls if c[1] == 0]
    assert len(walked) == 1 + 3 * 2                              # the defaults, then 2 a knob
    assert outcome.winner is not None
    assert outcome.winner.setting == {"k0": 2, "k1": 1, "k2": 2}


def test_a_knob_that_needs_another_and_an_axis_the_cell_cannot_take_are_left_out():
    cnn = catalog.WORKLOADS["cnn"]
    axes = dict(catalog.AXIS_DEFAULTS)
    torch = catalog.api("torch")
    knobs = applicable(torch, cnn, "fit", axes, "cpu")
    # TF32: a GPU's only; the fused optimizer: Hugging Face's fits (RMSprop has none)
    assert [k.name for k in knobs] == ["compile", "fullgraph", "channels_last"]
    assert blocked(knobs, {"compile": "auto", "fullgraph": True}, "cnn", "torch", None, axes,
                   "fit", 32) == "fullgraph needs compile"
    assert blocked(knobs, {"compile": "default", "fullgraph": True}, "cnn", "torch", None,
                   axes, "fit", 32) is None
    keras_torch = catalog.api("keras", "torch")
    names = [k.name for k in applicable(keras_torch, cnn, "fit", axes, "cpu")]
    assert names == ["jit_compile"]         # no steps_per_execution on torch; TF32: a GPU's
    keras_jax = catalog.api("keras", "jax")
    spe = [k for k in applicable(keras_jax, cnn, "fit", axes, "cpu")
           if k.name == "steps_per_execution"]
    assert spe and blocked(spe, {"steps_per_execution": 32}, "cnn", "keras", "jax", axes,
                           "fit", 32) is None
    # a value whose one call needs more samples than the cell's data holds: never a probe (on
    # examples/tuned.toml's tiny CNN, b64 × 32 > 1 024 failed in the worker, a process each)
    tiny = catalog.default_sizes("cnn", "tiny")
    assert blocked(spe, {"steps_per_execution": 32}, "cnn", "keras", "jax", axes, "fit", 64,
                   tiny) == ("one call of batch_size × steps_per_execution = 2048 samples is "
                             "more than options.samples = 1024")
    assert blocked(spe, {"steps_per_execution": 8}, "cnn", "keras", "jax", axes, "fit", 64,
                   tiny) is None
    # a cell that sets an axis itself keeps it: its knob is not searched
    assert "jit_compile" not in [k.name for k in applicable(keras_jax, cnn, "fit",
                                                             {**axes, "jit": True}, "cpu")]
    assert applicable(catalog.api("numpy"), catalog.WORKLOADS["matmul"], "run", axes,
                      "cpu") == []                                 # NumPy: no knob


def batch_probes(fits_up_to: int | None, wall: float = 1.0):
    """A batch probe runner: out of memory above `fits_up_to` (None: never)."""
    tried: list[int] = []

    def run(batch: int) -> Probe:
        tried.append(batch)
        if fits_up_to is not None and batch > fits_up_to:
            return Probe({"batch_size": batch}, 0, 0.1, "oom", None, wall, "out of memory")
        return Probe({"batch_size": batch}, 0, 0.1, "ok", 10.0, wall)

    return run, tried


def test_the_batch_search_doubles_then_bisects_and_keeps_a_headroom():
    run, tried = batch_probes(96)
    found = search_batch(4, 4 * 64, run, lambda: True)
    assert tried == [4, 8, 16, 32, 64, 128, 96, 112, 104]
    assert (found.largest_ok, found.smallest_failed) == (96, 104)
    assert found.chosen == 80                  # 90 % of 96, down to a multiple of 8
    assert search_batch(3, 3 * 64, batch_probes(5)[0], lambda: True).chosen == 4
    assert search_batch(3, 3 * 64, batch_probes(3)[0], lambda: True).chosen == 3   # its own


def test_the_batch_search_stops_at_its_ceiling_and_its_budget():
    run, tried = batch_probes(None)
    found = search_batch(8, 8 * 4, run, lambda: True)
    assert tried == [8, 16, 32] and found.chosen == 32 and found.smallest_failed is None
    run, tried = batch_probes(None)
    left = iter([True, True, False])
    found = search_batch(8, 8 * 64, run, lambda: next(left))
    assert tried == [8, 16] and found.budget_spent and found.chosen == 16
    assert search_batch(8, 64, batch_probes(4)[0], lambda: True).chosen is None


# --- end to end on the selftest workload ------------------------------------------------------

def runner(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner", *map(str, args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})


def selftest_matrix(folder: Path, name: str = "tune-selftest", batch: bool = False) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(matrix_text(
        name, repeats=3, steps=6, settle=0, profile="full",
        tables={"tuning": {"budget_minutes": 3.0, "window": 0.1,
                           **({"batch": "max", "max_batch_factor": 16} if batch else {})}},
        environments={"numpy": this_interpreter()},
        # with the batch search: a step of the whole batch, out of memory above 24
        benchmarks=[{"workload": "selftest", "batch_size": 4, "tier": ["defaults", "tuned"],
                     "options": {"sleep_ms": 8.0, **({"memory_batches": 24} if batch else {})}}]),
        encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> dict:
    """One tuning, its resume, a tuning cut by its budget, and the run of both tiers."""
    folder = tmp_path_factory.mktemp("tuning")
    matrix, results = selftest_matrix(folder), folder / "results"
    planned = runner("plan", matrix, "--results-dir", results, cwd=folder)
    tuned = runner("tune", matrix, "--results-dir", results, cwd=folder)
    (tuning,) = (results / "tune-selftest" / "tuning").iterdir()
    records = sorted((tuning / "cells").glob("*.json"))
    resumed = runner("tune", matrix, "--results-dir", results, "--resume", cwd=folder)
    short = runner("tune", matrix, "--results-dir", folder / "short", "--budget-minutes",
                   "0.02", cwd=folder)
    ran = runner(matrix, "--results-dir", results, cwd=folder)
    batch_matrix, batch_root = selftest_matrix(folder, "tune-batch", batch=True), folder / "b"
    batch_tuned = runner("tune", batch_matrix, "--results-dir", batch_root, cwd=folder)
    batch_ran = runner(batch_matrix, "--results-dir", batch_root, cwd=folder)
    (run,) = [p for p in (results / "tune-selftest").iterdir() if p.name != "tuning"]
    return {"planned": planned, "tuned": tuned, "tuning": tuning, "records": records,
            "resumed": resumed, "short": short, "short_root": folder / "short", "ran": ran,
            "run": run, "batch_tuned": batch_tuned, "batch_ran": batch_ran,
            "batch_root": batch_root}


@pytest.mark.slow
def test_without_a_tuning_the_tuned_cell_is_na_with_the_command(tuned):
    out = tuned["planned"].stdout
    assert tuned["planned"].returncode == 0, out + tuned["planned"].stderr
    assert "no tuning of selftest-run-numpy-b4-sleep_ms=8.0 for cpu and this stack: python " \
           "-m runner tune" in " ".join(out.split())


@pytest.mark.slow
def test_tune_finds_the_winner_and_prunes_with_reasons(tuned):
    assert tuned["tuned"].returncode == 0, tuned["tuned"].stdout + tuned["tuned"].stderr
    entry = tomllib.loads((tuned["tuning"] / "tuned.toml").read_text())["cells"][
        "selftest-run-numpy-b4-sleep_ms=8.0"]
    assert entry["knobs"] == {"selftest_speed": 0.5} and entry["status"] == "tuned"
    assert entry["gpu"] == "cpu" and entry["minutes"] <= entry["budget_minutes"] == 3.0
    (probes_file,) = (tuned["tuning"] / "tuning").glob("*/probes.jsonl")
    probes = [json.loads(line) for line in probes_file.read_text().splitlines()]
    assert len(probes) == entry["probes"] == len(tuned["records"])
    pruned = {p["pruned"].split(":")[0] for p in probes if p["pruned"]}
    assert pruned == {"oom", "different answer"}
    assert all(p["knobs"].get("selftest_greedy") for p in probes if
               (p["pruned"] or "").startswith("oom"))
    assert all(p["knobs"].get("selftest_shortcut") for p in probes if
               (p["pruned"] or "").startswith("different answer"))
    assert {"ms_per_step", "compile_s", "rss_peak_mb", "window_s", "rung"} <= set(probes[0])
    assert max(p["rung"] for p in probes) >= 1                  # the best re-probed longer


@pytest.mark.slow
def test_the_batch_search_doubles_bisects_keeps_a_headroom_then_tunes_there(tuned):
    assert tuned["batch_tuned"].returncode == 0, tuned["batch_tuned"].stderr
    (tuning,) = (tuned["batch_root"] / "tune-batch" / "tuning").iterdir()
    entry = tomllib.loads((tuning / "tuned.toml").read_text())["cells"][
        "selftest-run-numpy-b4-sleep_ms=8.0-memory_batches=24"]
    (probes_file,) = (tuning / "tuning").glob("*/probes.jsonl")
    batched = [json.loads(line) for line in probes_file.read_text().splitlines()]
    # 4, 8, 16 ran, 32 ran out of memory; 24 ran, 28 and 26 did not: 90 % of 24, to 8s: 16
    assert entry["knobs"] == {"batch_size": 16, "selftest_speed": 0.5}, entry
    searched = [(p["knobs"]["batch_size"], (p["pruned"] or "ok").split(":")[0])
                for p in batched[:7]]
    assert searched == [(4, "ok"), (8, "ok"), (16, "ok"), (32, "oom"), (24, "ok"),
                        (28, "oom"), (26, "oom")]
    assert all(p["knobs"]["batch_size"] == 16 for p in batched[len(searched):])
    assert "batch selftest-run-numpy-b4-sleep_ms=8.0-memory_batches=24: 16 kept (the " \
           "largest that ran: 24; 26 failed)" in " ".join(tuned["batch_tuned"].stdout.split())


@pytest.mark.slow
def test_a_searched_batch_is_compared_in_items_per_second_only(tuned):
    assert tuned["batch_ran"].returncode == 0, tuned["batch_ran"].stdout
    (run,) = [p for p in (tuned["batch_root"] / "tune-batch").iterdir() if p.name != "tuning"]
    report = (run / "report.md").read_text()
    section = report.split("## Defaults and tuned")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| selftest"))
    assert "items/s (batch 16) |" in row and "(items/s)" in row and "batch_size=16" in row
    gain = float(row.split("|")[6].split("×")[0])
    assert 5.0 < gain < 11.0               # 4× the items a step, each step half the time: 8×
    # no table of ms/step holds it: its steps hold another batch than the row's
    time_table = report.split("## Defaults and tuned")[0]
    assert not [line for line in time_table.splitlines() if "tier=tuned" in line]


@pytest.mark.slow
def test_a_resumed_tuning_runs_no_probe_again(tuned):
    assert tuned["resumed"].returncode == 0, tuned["resumed"].stderr
    assert "done in" in tuned["resumed"].stdout
    assert sorted((tuned["tuning"] / "cells").glob("*.json")) == tuned["records"]


@pytest.mark.slow
def test_a_spent_budget_stops_the_search_with_the_best_so_far(tuned):
    assert tuned["short"].returncode == 0, tuned["short"].stderr
    (folder,) = (tuned["short_root"] / "tune-selftest" / "tuning").iterdir()
    entry = tomllib.loads((folder / "tuned.toml").read_text())["cells"][
        "selftest-run-numpy-b4-sleep_ms=8.0"]
    assert entry["status"] == "budget spent" and entry["probes"] == 1
    assert entry["knobs"] == {}                                   # only the defaults ran


@pytest.mark.slow
def test_the_run_measures_both_tiers_applies_the_knobs_and_reports_them(tuned):
    ran = tuned["ran"]
    assert ran.returncode == 0, ran.stdout + ran.stderr
    records = [json.loads(p.read_text()) for p in (tuned["run"] / "cells").glob("*.json")]
    tuned_cells = [r for r in records if r["tier"] == "tuned"]
    assert len(tuned_cells) == 3 and all(r["status"] == "ok" for r in records)
    assert all(r["tuning"] == {"selftest_speed": 0.5} and
               r["effective"]["tuning"] == {"selftest_speed": 0.5} for r in tuned_cells)
    assert all(r["tuning"] == {} for r in records if r["tier"] == "defaults")
    manifest = json.loads((tuned["run"] / "manifest.json").read_text())
    (source,) = manifest["tuning"].values()
    assert source["source"] == str(tuned["tuning"]) and source["status"] == "tuned"
    report = (tuned["run"] / "report.md").read_text()
    section = report.split("## Defaults and tuned")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| selftest"))
    assert "| numpy |" in row and "selftest_speed=0.5" in row and "probes (tuned)" in row
    gain = float(row.split("|")[6].split("×")[0])
    assert 1.5 < gain < 2.5                                       # the step was halved


def test_a_knob_no_api_declares_is_one_line_with_a_suggestion(tmp_path, run_cli):
    path = tmp_path / "m.toml"
    path.write_text(matrix_text("k", tables={"tuning": {"knobs": ["compil"]}},
                                benchmarks=[{"workload": "matmul"}]), encoding="utf-8")
    code, out, err = run_cli("plan", path)
    assert code == 2 and out == ""
    assert err.strip().endswith("tuning.knobs: no API declares a knob 'compil' (did you mean "
                                "'compile'?) (docs/tuned.md lists them)")
