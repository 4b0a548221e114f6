"""A record is finished in one place (records.finish): a worker's outcome, a planned
not_applicable and a calibration reused from the peak cache all come out of it; a worker's
result.json is read and checked once, into its typed WorkerResult or why it is not one."""

from __future__ import annotations

import json

from runner.executors.base import Outcome
from runner.results.data import records
from runner.results.data.records import (Unusable, failed_result, finalize, finish,
                                         not_applicable_record, read_worker_result,
                                         reused_record, status_from_outcome)
from runner.worker.protocol import RECORD_FIELDS, empty_result
from tests.executors.attempts import cell_spec


def worker(samples: list[float]) -> dict:
    return {**empty_result(cell_spec()), "status": "ok", "samples_ms": samples,
            "items_per_step": 4.0, "flops_per_step": 2e9, "metadata": {"cpu": "x"}}


def test_finish_gives_every_field_the_status_and_the_figures_of_the_samples():
    record = finish(worker([1.0, 2.0, 3.0]), "ok", None, {"log": "logs/a.log"},
                    notes={"why": "a note"})
    assert list(record) == list(RECORD_FIELDS)
    assert record["median_ms"] == 2.0 and record["min_ms"] == 1.0 and record["stdev_ms"] == 1.0
    assert record["items_per_s"] == 2000.0 and record["achieved_tflops"] == 1.0
    assert record["log"] == "logs/a.log" and record["extra"] == {"why": "a note"}


def test_samples_that_are_not_finite_and_positive_are_not_summarised():
    record = finish(worker([0.0, 0.0]), "failed", "nothing measured")
    assert record["samples_ms"] == [] and record["median_ms"] is None
    assert record["items_per_s"] is None and record["error"] == "nothing measured"


def test_a_worker_outcome_sets_the_hosts_fields_and_its_price():
    outcome = Outcome(returncode=0, timed_out=False, wall_s=10.0)
    record = finalize(cell_spec(), outcome, worker([1.0, 3.0]), {"runner_version": "v"},
                      "logs/a.log", settle={"settled": True}, usd_per_s=0.5,
                      notes={"adopted_after_interrupt": True})
    assert record["status"] == "ok" and record["median_ms"] == 2.0
    assert record["metadata"] == {"cpu": "x", "runner_version": "v"}
    assert (record["returncode"], record["wall_s"], record["usd"]) == (0, 10.0, 5.0)
    assert record["settle"] == {"settled": True}
    assert record["extra"] == {"adopted_after_interrupt": True}


def test_a_planned_not_applicable_record_has_no_figures():
    record = not_applicable_record(cell_spec(), "no GPU path")
    assert (record["status"], record["error"]) == ("not_applicable", "no GPU path")
    assert record["samples_ms"] == [] and record["median_ms"] is None
    assert record["metadata"] == {} and record["returncode"] is None


def test_a_reused_calibration_keeps_its_stored_figures_and_takes_this_runs_id():
    stored = finish(worker([1.0, 3.0]), "ok", None)
    stored["median_ms"] = 2.5                # as an older runner stored it: kept, not redone
    record = reused_record({"record": stored, "run_id": "peaks/r0", "cached_at": "t"}, "r9")
    assert record["run_id"] == "r9" and record["median_ms"] == 2.5
    assert record["status"] == "ok" and record["samples_ms"] == [1.0, 3.0]
    assert record["extra"] == {"peak_cache": {"run_id": "peaks/r0", "cached_at": "t"}}


# --- result.json, read and checked once -------------------------------------------------------

def test_a_result_is_typed_with_the_hosts_coordinates_and_the_workers_figures(tmp_path):
    spec = cell_spec(calibration_sizes=[8, 16])
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**worker([1.0, 3.0]), "cell_id": "another", "environment": "x",
                                "options": {"n": 16}, "median_ms": 9.0}))
    result = read_worker_result(path, spec)
    assert isinstance(result, dict) and list(result) == list(empty_result(spec))
    assert (result["cell_id"], result["environment"]) == ("abc", "numpy")   # the spec's
    assert result["samples_ms"] == [1.0, 3.0] and result["metadata"] == {"cpu": "x"}
    assert result["options"] == {"n": 16}           # a calibration says the size it kept
    assert "median_ms" not in result                # the host's to compute


def test_a_result_that_is_not_one_is_a_problem_and_none_is_none(tmp_path):
    spec = cell_spec()
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**worker([1.0]), "compile_s": "soon"}))
    unusable = read_worker_result(path, spec)
    assert isinstance(unusable, Unusable) and unusable.problem.startswith("compile_s")
    outcome = Outcome(returncode=0, timed_out=False, wall_s=1.0)
    assert status_from_outcome(outcome, unusable) == (
        "crashed", f"the worker's result.json is not a valid result ({unusable.problem})")
    path.write_text("[1, 2]")
    assert read_worker_result(path, spec) is None
    assert read_worker_result(tmp_path / "missing.json", spec) is None
    assert status_from_outcome(outcome, None)[0] == "crashed"


def test_a_result_is_checked_once_on_its_way_to_the_record(tmp_path, monkeypatch):
    checked = []
    real = records.worker_problem
    monkeypatch.setattr(records, "worker_problem", lambda data: checked.append(1) or real(data))
    path = tmp_path / "result.json"
    path.write_text(json.dumps(worker([1.0, 3.0])))
    spec = cell_spec()
    result = read_worker_result(path, spec)
    record = finalize(spec, Outcome(returncode=0, timed_out=False, wall_s=1.0), result, {},
                      "logs/a.log")
    assert record["status"] == "ok" and record["median_ms"] == 2.0 and checked == [1]


def test_an_environment_that_failed_gives_the_spec_and_its_error():
    spec = cell_spec()
    record = finalize(spec, Outcome(returncode=None, timed_out=False, wall_s=0.0),
                      failed_result(spec, "no lock"), {}, "logs/a.log")
    assert (record["status"], record["error"]) == ("failed", "no lock")
    assert record["cell_id"] == "abc" and record["samples_ms"] == []
