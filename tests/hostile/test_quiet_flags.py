"""Flags that did nothing quietly: an empty cell pattern (which every name contains) is refused, a
--profile-cells or `profile --cell` pattern that names no cell says so as --only does, `plan`
lists the cells it will profile, `profile diff --top` takes whole numbers from 0 and says what 0
left out, and a torchao int4/float8 cell with device = "auto" on a host without a GPU is planned
not applicable with the reason instead of "to run". The cells run in this interpreter."""

from __future__ import annotations

import pytest

from tests.hostile.test_damaged_profiles import profiled_run  # noqa: F401
from tests.hostile.test_hostile_runs import (hostile_matrix, main,  # noqa: F401
                                             no_process_left_behind, one_line)
from tests.matrices import environment, matrix_text

MATRIX = hostile_matrix()          # 2 selftest cells: sleep_ms 1.0 and 2.0
CELLS = ("selftest-run-host-b1-behaviour=ok-sleep_ms=1.0",
         "selftest-run-host-b1-behaviour=ok-sleep_ms=2.0")


@pytest.mark.parametrize("flag", ["--only", "--profile-cells"])
@pytest.mark.parametrize("command", [["plan"], []])
def test_an_empty_cell_pattern_is_refused(flag, command, tmp_path, capsys):
    (tmp_path / "m.toml").write_text(MATRIX)
    line = one_line(*main(capsys, *command, tmp_path / "m.toml", flag, "", "--results-dir",
                          tmp_path / "r")[::2])
    assert line.endswith(f"argument {flag}: expected a cell name, glob or id, got ''"), line
    assert not (tmp_path / "r").exists()


def test_a_profile_cells_pattern_that_names_no_cell_is_refused(tmp_path, capsys):
    (tmp_path / "m.toml").write_text(MATRIX)
    for command in (["plan"], []):
        line = one_line(*main(capsys, *command, tmp_path / "m.toml", "--profile-cells",
                              "selftest*", "--profile-cells", "zzz", "--results-dir",
                              tmp_path / "r")[::2])
        assert line == f"error: --profile-cells zzz: no cell of {tmp_path / 'm.toml'} matches"
    assert not (tmp_path / "r").exists()


def test_plan_lists_the_cells_it_will_profile(tmp_path, capsys):
    (tmp_path / "m.toml").write_text(MATRIX)
    code, out, err = main(capsys, "plan", tmp_path / "m.toml", "--profile-cells", "*sleep_ms=2*")
    assert code == 0, out + err
    assert f"profiled after their repeats (1): {CELLS[1]}" in " ".join(out.split()), out
    code, out, err = main(capsys, "plan", tmp_path / "m.toml")
    assert "profiled after" not in out


def test_profile_says_what_its_cell_pattern_found(run_copy, capsys):
    line = one_line(*main(capsys, "profile", run_copy, "--cell", "zzz")[::2])
    assert line == f"error: --cell zzz: no cell of {run_copy / 'matrix.toml'} matches", line
    line = one_line(*main(capsys, "profile", run_copy, "--cell", "")[::2])
    assert line.endswith("argument --cell: expected a cell name, glob or id, got ''"), line
    assert not (run_copy / "profiles").exists()
    assert main(capsys, "profile", run_copy, "--cell", "*sleep_ms=2*")[0] == 0
    code, out, err = main(capsys, "profile", run_copy, "--cell", "*sleep_ms=2*")
    assert code == 0 and "◷ profile: no cell to profile (the cells named have no ok repeat, " \
        "run on several devices, or have a profile already)" in " ".join(out.split()), out


@pytest.mark.parametrize("top", ["-5", "x", "1.5"])
def test_profile_diff_top_is_a_whole_number_from_0(top, profiled_run, capsys):
    line = one_line(*main(capsys, "profile", "diff", profiled_run, profiled_run, "--top",
                          top)[::2])
    assert line.endswith(f"argument --top: expected a whole number of at least 0, got {top!r}")


def test_profile_diff_top_0_says_it_shows_no_op(profiled_run, capsys):
    code, out, err = main(capsys, "profile", "diff", profiled_run, profiled_run, "--top", "0")
    assert code == 0 and out.count("ops: none shown (--top 0)") == 2, out + err


@pytest.mark.parametrize("precision", ["int4", "float8"])
def test_torchao_cells_on_a_host_without_a_gpu_are_planned_not_applicable(precision, tmp_path,
                                                                           capsys):
    (tmp_path / "m.toml").write_text(matrix_text("quantized", environments={
        "torch": environment("torch")}, benchmarks=[{"workload": "cnn", "task": "predict",
                                                     "batch_size": 2,
                                                     "precision": precision}]))
    code, out, err = main(capsys, "plan", tmp_path / "m.toml")
    said = " ".join(out.split())
    assert code == 0 and "0 runs to do, 0 done, 1 not applicable" in said, out + err
    assert 'need a CUDA GPU' in said or "run on CUDA GPUs only" in said, said
    assert '(device = "auto", and this run has no GPU)' in said, said
