"""The worker's typed contract (runner/worker/protocol.py): its result is built once with
exactly the record's spec and worker fields, in result.json's order; the user-workload entry a
spec carries is exactly what the host builds."""

from __future__ import annotations

import json
import typing
from dataclasses import fields

import pytest

from runner.results.data.types import Record
from runner.run.cells import user_workload_entry
from runner.schema import matrix as matrix_mod
from runner.worker.protocol import (RECORD_FIELDS, WORKER_FIELDS, CellSpec, UserWorkloadEntry,
                                    WorkerResult, empty_result, fill, json_text)
from tests.executors.attempts import cell_spec
from tests.schema.test_user_workloads import STEP, user_matrix, workload_file


def keys_of(typed: type) -> set[str]:
    return set(typing.get_type_hints(typed))


def test_the_worker_result_declares_exactly_what_the_spec_and_the_worker_fill():
    filled = {k for k, (origin, _) in RECORD_FIELDS.items() if origin in ("spec", "worker")}
    assert keys_of(WorkerResult) == filled
    assert keys_of(WorkerResult) < keys_of(Record)          # the host adds its own fields


def test_the_result_is_built_with_every_key_in_result_jsons_order():
    spec = cell_spec(user_workload=None)
    result = empty_result(spec)
    assert set(result) == keys_of(WorkerResult)
    spec_only = [f.name for f in fields(CellSpec)
                 if f.name != "result_path" and f.name not in WORKER_FIELDS]
    assert list(json.loads(json_text(result))) == [*WORKER_FIELDS, *spec_only]
    assert result["status"] == "failed" and result["samples_ms"] == [] and \
        result["gpu_energy_j"] is None and result["options"] == {"n": 8}


def test_fill_copies_result_fields_and_refuses_any_other():
    result = empty_result(cell_spec())
    fill(result, {"gpu_idle_power_w": 61.5, "cpu_util_mean": 99.0})
    assert result["gpu_idle_power_w"] == 61.5 and result["cpu_util_mean"] == 99.0
    with pytest.raises(KeyError, match="telemetry_window_s"):
        fill(result, {"telemetry_window_s": 1.0})
    assert "telemetry_window_s" not in result


def test_a_user_workload_entry_is_exactly_what_the_host_puts_in_the_spec(tmp_path):
    workload_file(tmp_path / "bench", STEP)
    matrix = matrix_mod.load(user_matrix(
        tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n'))
    (cell,) = [c for c in matrix.cells if c.user_workload is not None and not c.not_applicable]
    entry = user_workload_entry(cell)
    assert entry is not None
    assert set(entry) == keys_of(UserWorkloadEntry)
    assert entry["runs_as"] == "step" and entry["file"] == "bench/bench.py"
    assert entry["defaults"] == {"n": 8} and len(entry["sha256"]) == 64
    # across the process boundary: the spec.json the worker reads gives the same entry back
    spec = cell_spec(user_workload=entry)
    assert CellSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).user_workload == entry


class FakeMonitor:
    def summary(self) -> dict:
        return {"cpu_util_mean": 95.0, "telemetry_window_s": 1.5, "gpu_energy_j": 300.0,
                "gpu_clock_events": ["sw_power_cap"], "gpu_temp_max_c": 71}


def test_a_windows_telemetry_fills_the_result_and_the_rest_goes_to_extra():
    from runner.worker.__main__ import record_window
    from runner.worker.bench import Bench, StepClock

    result = empty_result(cell_spec())
    clock = StepClock(warmup_calls=1, timed_calls=2, sync=lambda out: None)
    clock.warmup_s, clock.timed_s = [0.5], [0.002, 0.004]
    record_window(result, Bench(items_per_step=8, step=lambda: None, flops_per_step=1e6),
                  clock, FakeMonitor())
    assert (result["cpu_util_mean"], result["gpu_energy_j"]) == (95.0, 300.0)
    assert result["gpu_clock_events"] == ["sw_power_cap"]
    assert result["extra"] == {"telemetry_window_s": 1.5, "gpu_temp_max_c": 71}
    assert result["samples_ms"] == [2.0, 4.0] and result["train_s"] == 0.006
    assert (result["compile_s"], result["items_per_step"]) == (0.5, 8)
