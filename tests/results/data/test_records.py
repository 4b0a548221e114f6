"""A record is finished in one place (records.finish): a worker's outcome, a planned
not_applicable and a calibration reused from the peak cache all come out of it."""

from __future__ import annotations

from runner.executors.base import Outcome
from runner.results.data.records import finalize, finish, not_applicable_record, reused_record
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
