"""compare across block sizes (issue 59 item 1). The block size is calibrated in every run (the
smallest power of two of calls lasting 10 ms), so a blocked cell that gets 2× slower gets half
the block: with calls_per_sample among the timing settings, compare said "not comparable:
calls_per_sample 16 → 8" and exited 0, passing exactly the large regressions. Here a real
selftest run (a step that sleeps, timed in blocks) is run twice, B's second run planted with a
2× slowdown as a real one reads in the records (per-step times doubled, the block halved)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results.analysis import comparison as compare
from runner.results.data.ledger import Ledger
from tests.matrices import matrix_text, this_interpreter

# 200 steps of a 1 ms sleep: a block of 8 or 16 calls on a quiet machine (the cap is 20).
BLOCKED = matrix_text("blocks", repeats=3, steps=200, timeout=120,
                      environments={"here": this_interpreter()},
                      benchmarks=[{"workload": "selftest",
                                   "options": {"behaviour": "ok", "sleep_ms": 1}}])


def run_once(folder: Path, *args: str) -> Path:
    matrix = folder / "matrix.toml"
    matrix.write_text(BLOCKED, encoding="utf-8")
    before = set((folder / "results" / "blocks").glob("*")) \
        if (folder / "results" / "blocks").is_dir() else set()
    assert cli.main([str(matrix), "--results-dir", str(folder / "results"), *args]) == 0
    (run,) = set((folder / "results" / "blocks").iterdir()) - before
    return run


def records(run: Path) -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted((run / "cells").glob("*.json"))]


def rewrite(run: Path, path: Path, record: dict) -> None:
    """A record as the runner of another run would have written it (its digest in the
    ledger), so that it is read as the run's own."""
    text = json.dumps(record)
    path.write_text(text)
    Ledger(run).note(f"cells/{path.name}", text.encode(), replacing="planted by the test")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Run A, and run B (the same matrix again) as a cell that got 2× slower reads: each
    sample doubled and the block halved, as B's calibration would have chosen."""
    folder = tmp_path_factory.mktemp("blocks")
    run_a = run_once(folder)
    run_b = run_once(folder)
    block = records(run_a)[0][1]["calls_per_sample"]     # B's own may differ under load
    for path, record in records(run_b):
        record["samples_ms"] = [2 * s for s in record["samples_ms"]]
        record["train_s"] *= 2
        record["calls_per_sample"] = block // 2
        rewrite(run_b, path, record)
    return run_a, run_b


def test_a_two_times_slower_blocked_cell_is_slower_and_exits_1(two_runs):
    run_a, run_b = two_runs
    block = records(run_a)[0][1]["calls_per_sample"]
    assert block >= 2 and records(run_a)[0][1]["block_source"] == "calibrated"
    result = compare.compare_runs(run_a, run_b)
    (cell,) = result.cells
    assert cell.verdict == compare.SLOWER and cell.ratio == pytest.approx(2.0, rel=0.1)
    assert f"blocks of {block} → {block // 2} calls" in cell.reason
    assert "per-step times compare across block sizes" in cell.reason
    assert result.exit_code == 1
    assert cli.main(["compare", str(run_a), str(run_b)]) == 1


def test_blocks_from_a_hands_each_cell_a_s_block(two_runs, tmp_path, capsys):
    """`--blocks-from RUN_A`: B times the blocks A timed instead of calibrating its own, and
    its manifest says so; a folder that is not a run is one line and exit 2."""
    run_a, _ = two_runs
    block = records(run_a)[0][1]["calls_per_sample"]
    run_c = run_once(tmp_path, "--blocks-from", str(run_a))
    assert all(r["calls_per_sample"] == block and r["block_source"] == "handed_over"
               for _, r in records(run_c))
    manifest = json.loads((run_c / "manifest.json").read_text())
    assert manifest["blocks_from"] == {"run": str(run_a), "cells": 1}
    capsys.readouterr()
    matrix = tmp_path / "matrix.toml"
    assert cli.main([str(matrix), "--results-dir", str(tmp_path / "other"),
                     "--blocks-from", str(tmp_path / "nowhere")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no such run folder" in line and not (tmp_path / "other").exists()


def gpu_side(run: Path, source: str, size: int, short: bool = False) -> None:
    """The run's records as a GPU cell's: timed per call or in blocks, maybe a short block."""
    for path, record in records(run):
        record["metadata"]["gpu_name"] = "NVIDIA H200"
        record["effective"]["device"] = "cuda:0"
        record["block_source"], record["calls_per_sample"] = source, size
        if short:
            record["extra"]["block_short"] = {"median_sample_ms": 1.0, "calls_per_sample": size,
                                              "target_ms": 10.0}
        rewrite(run, path, record)


def test_per_call_against_blocks_on_a_gpu_is_refused_yet_a_slowdown_exits_1(two_runs, tmp_path):
    """On a GPU a per-call sample holds the synchronisation's latency that a block spreads:
    those regimes are not compared, but a significant 2× slowdown still fails the gate."""
    run_a, run_b = (shutil.copytree(r, tmp_path / r.name) for r in two_runs)
    gpu_side(run_a, "per_call", 1)
    gpu_side(run_b, "calibrated", 8)
    result = compare.compare_runs(run_a, run_b)
    (cell,) = result.cells
    assert cell.verdict == compare.NOT_COMPARABLE
    assert "timing regime differs: blocks of 1 → 8 calls (per-call → blocked on a GPU" \
        in cell.reason
    assert cell.slower_unjudged and cell.reason.startswith("slower ×")
    assert result.exit_code == 1


def test_a_short_block_refuses_a_change_of_block_size(two_runs, tmp_path):
    run_a, run_b = (shutil.copytree(r, tmp_path / r.name) for r in two_runs)
    gpu_side(run_a, "calibrated", 16)
    gpu_side(run_b, "calibrated", 8, short=True)
    (cell,) = compare.compare_runs(run_a, run_b).cells
    assert cell.verdict == compare.NOT_COMPARABLE
    assert "B's block was too short for its target" in cell.reason
    gpu_side(run_a, "calibrated", 8)                 # the same block: like with like
    (cell,) = compare.compare_runs(run_a, run_b).cells
    assert cell.verdict == compare.SLOWER and "blocks of" not in cell.reason
