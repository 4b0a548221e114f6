"""The typed shapes (runner/results/data/types.py) and the places that define what they hold cannot
drift: the record is declared once (runner/worker/protocol.py's Record: each field's type, who
fills it, what it means) and RECORD_FIELDS, the schema and the manual's table are made from it; a
CellSummary has exactly what cell_summaries and the same-answer check build, a Manifest exactly
what run/manifest.py writes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import typing
from dataclasses import fields
from pathlib import Path

import pytest

from runner.results.analysis import answers
from runner.results.analysis.summaries import cell_summaries
from runner.results.data import schemas
from runner.results.data.store import open_run
from runner.results.data.types import CellSummary, Manifest, ManifestCell, Record
from runner.run import manifest as manifest_mod
from runner.worker import catalog
from runner import manual
from runner.worker.protocol import RECORD_FIELDS, SCHEMA_VERSION, STATUSES, CellSpec
from tests.fixtures import FIXTURE_RUNS
from tests.worker.test_catalog import changed_files, copy_of_the_runner, insert_after



def drift(declared: set[str], built: set[str]) -> dict[str, list[str]]:
    """What one side has and the other lacks (empty when they agree)."""
    return {k: sorted(v) for k, v in (("undeclared", built - declared),
                                      ("never built", declared - built)) if v}


def keys_of(typed: type) -> set[str]:
    return set(typing.get_type_hints(typed))


def test_drift_names_what_either_side_lacks():
    assert drift({"a", "b"}, {"a", "b"}) == {}
    assert drift({"a", "b"}, {"a", "c"}) == {"undeclared": ["c"], "never built": ["b"]}


def test_a_record_has_exactly_the_registry_fields():
    assert drift(keys_of(Record), set(RECORD_FIELDS)) == {}
    assert Record.__total__        # a record read back has every field (None where unknown)


def test_the_registry_is_the_declaration_in_the_records_order():
    """RECORD_FIELDS is made from Record: its fields with who fills each and what it means,
    the spec's (CellSpec's but result_path) in the spec's order after status and error."""
    spec = [f.name for f in fields(CellSpec) if f.name != "result_path"]
    names = list(RECORD_FIELDS)
    assert names[:3] == ["schema", "status", "error"] and names[3:3 + len(spec)] == spec
    assert names[-2:] == ["items_per_s", "achieved_tflops"]
    assert {origin for origin, _ in RECORD_FIELDS.values()} == {"spec", "worker", "host"}
    assert RECORD_FIELDS["calls_per_sample"].origin == "worker"   # a spec field the worker sets
    assert all(meaning for _, meaning in RECORD_FIELDS.values())


def test_the_manuals_table_is_the_declaration():
    rows = [line.split(" | ") for line in manual.record_fields_table().splitlines()[2:]]
    assert [row[0].strip("| `") for row in rows] == list(RECORD_FIELDS)
    by_name = {row[0].strip("| `"): row for row in rows}
    assert by_name["samples_ms"][1:3] == ["list of number", "worker"]
    assert RECORD_FIELDS["samples_ms"].help in by_name["samples_ms"][3]
    assert by_name["wall_s"][1:3] == ["number \\| null", "host"]
    assert by_name["device"][3].startswith("the device axis: auto")    # the catalog's words


TOY_FIELD = '    toy_figure: Annotated[Figure | None, host("a toy figure, in toys")]\n'
PROBE = """
import json, sys
from runner import manual
from runner.results.data import schemas
from runner.worker.protocol import RECORD_FIELDS
record = json.loads(open(sys.argv[1]).read())
print(json.dumps({"fields": list(RECORD_FIELDS), "filled": RECORD_FIELDS["toy_figure"],
                  "too_big": schemas.record_problem({**record, "toy_figure": 1e300}),
                  "fine": schemas.record_problem({**record, "toy_figure": 2.5}),
                  "manual": [line for line in manual.record_fields_table().splitlines()
                             if "toy_figure" in line]}))
"""


def test_a_field_declared_once_is_in_the_registry_the_schema_and_the_manual(tmp_path):
    """Adding a record field is one line of runner/worker/protocol.py."""
    copy = copy_of_the_runner(tmp_path)
    insert_after(copy / "runner" / "worker" / "protocol.py",
                 '        "log file of this cell × repeat, relative to the run folder")]\n',
                 TOY_FIELD)
    assert changed_files(copy) == {"runner/worker/protocol.py"}
    done = subprocess.run([sys.executable, "-c", PROBE,
                           str(FIXTURE_RUNS / "base" / "cells" / "f1cnnkrtf0-r1.json")],
                          cwd=copy, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    names = list(RECORD_FIELDS)
    log = names.index("log") + 1
    assert found["fields"] == [*names[:log], "toy_figure", *names[log:]]
    assert found["filled"] == ["host", "a toy figure, in toys"]
    assert found["too_big"].startswith("toy_figure") and found["fine"] is None
    assert found["manual"] == ["| `toy_figure` | number \\| null | host | a toy figure, in toys |"]


def fixture_summaries(name: str) -> list[CellSummary]:
    store, manifest = open_run(FIXTURE_RUNS / name)
    records, unreadable = store.read_records()
    assert records and not unreadable
    summaries = cell_summaries(records, [c["id"] for c in manifest.get("cells", [])],
                               (manifest.get("calibration") or {}).get("peaks"),
                               manifest.get("machine_profile"))
    return answers.checked(summaries, answers.unchecked_cells(manifest))


@pytest.mark.parametrize("run", ["base", "driver"])
def test_a_cell_summary_has_exactly_what_the_summaries_build(run):
    summaries = fixture_summaries(run)
    built = set().union(*(s.keys() for s in summaries))
    assert drift(keys_of(CellSummary), built) == {}
    # every summary carries every key (the renderers may read any of them)
    assert all(set(s) == built for s in summaries)


def written_manifest_keys() -> set[str]:
    """The keys run/manifest.py writes: build_manifest's dict and every
    manifest[...] = ."""
    tree = ast.parse(Path(manifest_mod.__file__).read_text(encoding="utf-8"))
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "build_manifest":
            returned = next(n.value for n in ast.walk(node) if isinstance(n, ast.Return))
            keys |= {k.value for k in returned.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == "manifest":
            keys.add(node.slice.value)
    return keys


def test_a_manifest_has_exactly_what_the_manifest_module_writes():
    assert drift(keys_of(Manifest), written_manifest_keys()) == {}
    for run in ("base", "same", "slower", "driver"):
        _, manifest = open_run(FIXTURE_RUNS / run)
        assert set(manifest) <= keys_of(Manifest), run
        for cell in manifest["cells"]:
            assert set(cell) <= keys_of(ManifestCell), run


def test_the_record_types_the_axes_as_the_catalog_declares_them():
    hints = typing.get_type_hints(Record)
    for name, axis in catalog.AXES.items():
        expected = axis.type if axis.per_workload else axis.type | None
        assert hints[name] == expected, name
    assert typing.get_args(hints["schema"]) == (SCHEMA_VERSION,)
    assert typing.get_args(hints["status"]) == STATUSES


def a_stored_record() -> dict:
    (path,) = sorted((FIXTURE_RUNS / "base" / "cells").glob("f1cnnkrtf0-r1.json"))
    record = json.loads(path.read_text(encoding="utf-8"))
    assert schemas.record_problem(record) is None
    return record


def test_every_typed_field_of_the_record_is_what_validates_it():
    """One declaration: each field Record types (not Any) is checked with that type when a
    record is read back, and a field it leaves Any is taken as it is."""
    hints = typing.get_type_hints(Record)
    wrong = [{"not": "this field's type"}]
    for name in RECORD_FIELDS:
        problem = schemas.record_problem({**a_stored_record(), name: wrong})
        if hints[name] is typing.Any:
            assert problem is None, name
        else:
            assert problem is not None and problem.startswith(name), (name, problem)
    # bounds are part of the type: a figure beyond them is refused like a wrong type
    assert schemas.record_problem({**a_stored_record(), "gpu_mem_clock_mhz": 1e300}) \
        .startswith("gpu_mem_clock_mhz")
