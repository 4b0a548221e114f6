"""The results folder: atomic records, never overwritten, corrupt files ignored on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.errors import UsageError
from runner.results.data.records import not_applicable_record
from runner.results.data.store import Store
from runner.worker.protocol import CellSpec, atomic_target, write_json_atomic


def record(cell_id: str, repeat: int = 1, status: str = "failed") -> dict:
    """A complete, valid record of cell `cell_id` (its content is not what is tested)."""
    spec = CellSpec(run_id="demo/x", cell_id=cell_id, cell_name=f"matmul-run-np-b1-{cell_id}",
                    repeat=repeat, environment="np", api="numpy", backend=None, image="numpy",
                    workload="matmul", task="run", batch_size=1, precision="float32", jit="auto",
                    size="tiny", tf32=None, steps_per_execution=1, data="device", device="auto",
                    options={}, steps=3, warmup_steps=1, seed=0, result_path="")
    out = not_applicable_record(spec, "")
    out.update(status=status, error=None if status == "ok" else "x")
    if status == "ok":
        out["samples_ms"] = [1.0, 2.0]
    return out


def test_write_record_is_atomic_and_never_overwrites(tmp_path):
    store = Store.create("demo", tmp_path)
    store.write_record("abc-r1", record("abc", status="ok"))
    assert json.loads(store.record_path("abc-r1").read_text())["status"] == "ok"
    assert not [p for p in store.cells.iterdir() if p.name.startswith(".tmp")]
    with pytest.raises(FileExistsError):
        store.write_record("abc-r1", record("abc"))
    assert json.loads(store.record_path("abc-r1").read_text())["status"] == "ok"


def test_finished_ignores_partial_and_foreign_files(tmp_path):
    store = Store.create("demo", tmp_path)
    store.write_record("a-r1", record("a"))
    (store.cells / "b-r1.json").write_text('{"schema": 1, "status": "o')   # torn write
    (store.cells / "c-r1.json").write_text('{"schema": 99, "status": "ok"}')
    (store.cells / ".b-r1.json.x1y2.tmp").write_text("{}")
    assert store.finished() == {"a-r1"}


def test_atomic_writer_leaves_old_file_when_serialisation_fails(tmp_path):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"v": 1})
    class Unreadable:
        def item(self):
            raise RuntimeError("cannot convert")

    with pytest.raises(RuntimeError):
        write_json_atomic(target, {"v": Unreadable()})  # fails half-way through serialising
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_write_in_progress_is_invisible_to_record_patterns(tmp_path):
    """A reader globbing *.json (pathlib's glob matches hidden files) while a record is being
    written sees the old record only, never the partial one."""
    target = tmp_path / "r.json"
    write_json_atomic(target, {"v": 1})
    with atomic_target(target) as tmp:
        Path(tmp).write_text('{"v": 2')                 # half-way through
        assert [p.name for p in tmp_path.glob("*.json")] == ["r.json"]
        assert json.loads(target.read_text()) == {"v": 1}
        Path(tmp).write_text('{"v": 2}')
    assert json.loads(target.read_text()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_non_finite_floats_become_null(tmp_path):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"loss": float("nan"), "x": [1.0, float("inf")]})
    assert json.loads(target.read_text()) == {"loss": None, "x": [1.0, None]}


def test_two_runs_in_one_second_get_distinct_folders(tmp_path):
    assert Store.create("demo", tmp_path).root != Store.create("demo", tmp_path).root


def test_latest_and_open_reject_non_runs(tmp_path):
    with pytest.raises(UsageError):
        Store.latest("nothing", tmp_path)
    with pytest.raises(UsageError):
        Store.open(tmp_path)
