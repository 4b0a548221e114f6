"""Planning: repeats as rounds interleaved across cells, --only, finished entries skipped."""

from __future__ import annotations

from runner.run.plan import make_plan
from runner.schema import matrix as matrix_mod
from tests.matrices import matrix_text

BENCH = matrix_text(None, run_defaults=False, repeats=3, environments=["numpy", "keras-jax"],
                    benchmarks=[{"workload": "matmul", "environments": ["*"]},
                                {"workload": "elementwise", "environments": ["numpy"],
                                 "repeats": 2}])


def cells(write_matrix):
    return matrix_mod.load(write_matrix(BENCH, with_environments=False), profile="full").cells


def test_rounds_are_interleaved(write_matrix):
    plan = make_plan(cells(write_matrix))
    order = [(e.cell.name, e.repeat) for e in plan.to_run]
    assert [r for _, r in order] == [1, 1, 1, 2, 2, 2, 3, 3]
    assert order[0][0] != order[1][0]
    assert len(plan.to_run) == 3 + 3 + 2


def test_only_filters_by_substring_glob_or_id(write_matrix):
    all_cells = cells(write_matrix)
    by_sub = make_plan(all_cells, only=["elementwise"])
    assert {e.cell.workload for e in by_sub.to_run} == {"elementwise"}
    assert by_sub.filtered_out == 2
    by_glob = make_plan(all_cells, only=["matmul-*-keras-*"])
    assert {e.cell.environment for e in by_glob.to_run} == {"keras-jax"}
    target = all_cells[0]
    assert {e.cell.id for e in make_plan(all_cells, only=[target.id]).to_run} == {target.id}


def test_finished_entries_are_skipped(write_matrix):
    all_cells = cells(write_matrix)
    first = make_plan(all_cells)
    done = {first.to_run[0].key, first.to_run[4].key}
    resumed = make_plan(all_cells, finished=done)
    assert {e.key for e in resumed.done} == done
    assert len(resumed.to_run) == len(first.to_run) - 2
    assert not done & {e.key for e in resumed.to_run}


def test_the_first_line_names_the_profile_and_its_reason_verbatim(write_matrix, run_cli):
    """The reason quotes the matrix's "[run]" table: printed as text, not read as markup."""
    matrix = write_matrix(matrix_text("why", run_defaults=False, profile="full",
                                      environments=["numpy", "keras-jax"],
                                      benchmarks=[{"workload": "matmul", "environments": ["numpy"]}]),
                          with_environments=False)
    code, out, _ = run_cli(matrix, "--dry-run")
    assert code == 0, out
    assert out.splitlines()[0] == "profile: full ([run] profile full)"


def test_block_sizes_come_from_the_first_ok_repeat_and_a_failed_one_passes_the_turn(write_matrix):
    from runner.run.cells import BlockSizes

    cell = cells(write_matrix)[0]
    plan = make_plan([cell])
    r1, r2, r3 = plan.to_run
    blocks = BlockSizes([], plan.to_run)
    assert blocks.ready(r1) and not blocks.ready(r2) and not blocks.ready(r3)
    assert blocks.size(cell) is None                      # the first repeat calibrates
    blocks.finished(r1, {"cell_id": cell.id, "status": "failed", "calls_per_sample": None})
    assert blocks.ready(r2) and not blocks.ready(r3)      # the next repeat calibrates instead
    blocks.finished(r2, {"cell_id": cell.id, "status": "ok", "calls_per_sample": 16})
    assert blocks.ready(r3) and blocks.size(cell) == 16
    stored = [{"cell_id": cell.id, "repeat": 2, "status": "ok", "calls_per_sample": 8},
              {"cell_id": cell.id, "repeat": 1, "status": "ok", "calls_per_sample": 4}]
    resumed = BlockSizes(stored, [r3])
    assert resumed.size(cell) == 4 and resumed.ready(r3)  # the lowest ok repeat's, as stored


def test_plan_json_is_the_plan_as_data(write_matrix, run_cli):
    """`plan --json`: every cell the selection keeps with its state or why it is not applicable,
    its estimate, the calibrations and the run's estimate, on stdout alone; the same cells as
    the table, and the same exit code."""
    import json

    matrix = write_matrix(matrix_text(
        "planned", run_defaults=False, repeats=2, calibrate=True,
        environments=["numpy", "keras-jax", "torch"],
        benchmarks=[{"workload": "cnn", "batch_size": 8, "environments": ["*"],
                     "steps_per_execution": 4}]),
        with_environments=False)
    code, out, err = run_cli("plan", matrix, "--profile", "smoke", "--json")
    assert code == 0, err
    plan = json.loads(out)                       # stdout holds the document alone
    assert "estimate:" in err and "Plan:" in err  # the human lines went to stderr
    states = {c["environment"]: c for c in plan["cells"]}
    assert states["keras-jax"]["status"] == "to run" and states["keras-jax"]["runs"] == 2
    assert states["keras-jax"]["axes"]["steps_per_execution"] == 4
    assert states["torch"]["status"] == "not applicable"
    assert "steps_per_execution" in states["torch"]["not_applicable"]
    assert states["torch"]["run_s"] is None and states["keras-jax"]["run_s"]["expected"] > 0
    assert states["numpy"]["not_applicable"] == "cnn has no numpy implementation"
    assert plan["estimate"]["runs"] == 2 and plan["estimate"]["seconds"]["expected"] > 0
    assert plan["calibrations"] and plan["profile"] == "smoke" and plan["lanes"] == 1
    code, table, _ = run_cli("plan", matrix, "--profile", "smoke")
    assert code == 0
    assert all(c["name"] in table and c["id"] in table for c in plan["cells"]
               if c["status"] == "to run")
