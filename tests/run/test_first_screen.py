"""The first screen: what a run says before its first cell fits one 100-column terminal screen
(26 lines) — the variables every environment shares said once, the environments one line each,
one line for the estimate, one for the environments ready and one for the calibration — on
matrix.toml's dry run and on a real run of eight environments; and the tables at 100 columns
keep names whole."""

from __future__ import annotations

import math

from runner.paths import REPO_ROOT
from tests.matrices import matrix_text, this_interpreter

MATRIX = REPO_ROOT / "matrix.toml"
SCREEN = 26


def screen_lines(lines: list[str], width: int = 100) -> int:
    """The rows these lines take on a terminal `width` columns wide (a long line wraps)."""
    return sum(max(1, math.ceil(len(line) / width)) for line in lines)


def before(lines: list[str], first: str) -> list[str]:
    return lines[:next(i for i, line in enumerate(lines) if line.startswith(first))]


def test_the_dry_run_of_matrix_toml_says_its_setup_in_one_screen(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run_cli(MATRIX, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    setup = before(lines, "Plan: ")
    assert screen_lines(setup) <= SCREEN, "\n".join(setup)
    shared = [line for line in setup if line.startswith("env ")]
    assert shared == ["env (every environment): XLA_PYTHON_CLIENT_PREALLOCATE=false "
                      "TF_FORCE_GPU_ALLOW_GROWTH=true"]
    assert all(len(line) <= 100 for line in lines[len(setup):])       # the tables fit
    for name in ("matmul-run-keras-tensorflow-b1-size=tiny",
                 "bert-predict-keras-tensorflow-b32-size=tiny"):
        assert any(line.startswith(name + " ") for line in lines), name   # whole, not folded


def test_output_to_a_pipe_or_a_log_file_is_laid_out_for_100_columns(run_cli, monkeypatch):
    # No terminal and no COLUMNS (`python -m runner matrix.toml | tee run.log`): rich alone
    # would assume 80 columns and fold every lock path of the set-up table mid-word.
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, err = run_cli(MATRIX, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    setup = before(lines, "Plan: ")
    assert screen_lines(setup) <= SCREEN, "\n".join(setup)
    assert all(len(line) <= 100 for line in lines[len(setup):])       # the tables fit
    assert any(line.startswith("keras-tensorflow ") and "images/tensorflow/requirements.lock"
               in line for line in setup), "\n".join(setup)


def test_a_real_run_of_eight_environments_says_its_setup_in_one_screen(write_matrix, run_cli,
                                                                       monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    environments = {f"env-{n}": this_interpreter("numpy") for n in range(8)}
    environments["env-7"]["env"] = {"OMP_NUM_THREADS": "1"}   # its own line on the screen
    matrix = write_matrix(matrix_text(
        "screen", steps=2, calibrate=True,
        min_time=0.1,           # the peaks' timed windows: what is checked here is their lines
        preallocate=False, profile="smoke", tables={"profiles": {"smoke": {"size": "tiny"}}},
        environments=environments, benchmarks=[{"workload": "selftest", "environments": ["*"]}]),
        with_environments=False)
    code, out, err = run_cli(matrix)
    assert code == 0, out + err
    lines = out.splitlines()
    setup = before(lines, "✓ selftest-")
    assert screen_lines(setup) <= SCREEN, "\n".join(setup)
    env = [line for line in setup if line.startswith("env ")]
    assert env == ["env (every environment): XLA_PYTHON_CLIENT_PREALLOCATE=false "
                   "TF_FORCE_GPU_ALLOW_GROWTH=true", "env env-7: OMP_NUM_THREADS=1"]
    assert sum(line.startswith("✓ environments ready: ") for line in setup) == 1
    assert sum(line.startswith("✓ calibration: 8 peak(s) in 8 environment(s)")
               for line in setup) == 1
    # The results table at 100 columns: every environment's name readable in its header.
    start = next(i for i, line in enumerate(lines) if "Workload (task)" in line)
    table = before(lines[start:], "report: ")
    assert all(len(line) <= 100 for line in table)
    assert all("…" not in line for line in table)
