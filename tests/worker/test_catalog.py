"""The catalog (runner/worker/catalog/) is the one declaration of every axis and every workload:
every (workload, API) it declares has a module and every module is declared; every consumer of
an axis reads its declaration; and a toy axis or a toy workload added to a copy of the runner
touches only the catalog (and, for the axis, its typed field in the cell spec and the record; for
the workload, its per-API module), then is validated, planned, run by the real worker and shown
in summary.csv."""

from __future__ import annotations

import ast
import csv
import dataclasses
import json
import shutil
import subprocess
import sys
import typing
from pathlib import Path


from runner import schema
from runner.paths import REPO_ROOT as ROOT
from runner.results.analysis import summaries
from runner.results.data import schemas
from runner.results.render import files
from runner.schema import matrix
from runner.worker import catalog
from runner.worker import protocol
from runner.worker.protocol import RECORD_FIELDS, CellSpec
from tests.matrices import matrix_text, this_interpreter

APIS_DIR = ROOT / "runner" / "worker" / "apis"


def package_modules() -> dict[str, set[str]]:
    """Per API: the modules its package's directory holds (by name, without __init__)."""
    return {api: {p.stem for p in (APIS_DIR / record.package).glob("*.py")
                  if p.stem != "__init__"}
            for api, record in catalog.API_RECORDS.items()}


def defines_build(module: str) -> bool:
    """Whether runner/worker/apis/<module>.py exists and defines build at its top level (read
    with ast: the host never imports a framework)."""
    path = APIS_DIR / (module.replace(".", "/") + ".py")
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "build" for node in tree.body) \
        or any(isinstance(node, ast.ImportFrom) and "build" in {a.name for a in node.names}
               for node in tree.body)


def test_every_module_an_api_record_names_builds_and_every_workload_module_is_named():
    modules = package_modules()
    for api, record in catalog.API_RECORDS.items():
        assert (APIS_DIR / record.package / "__init__.py").is_file(), api
        for workload, module in record.workloads.items():
            assert workload in catalog.WORKLOADS, f"{api}: names an undeclared workload {workload}"
            assert defines_build(module), f"{workload} on {api}: {module} has no build"
        # a module of its package named for a workload runs only where the record names it
        for name in modules[api] & set(catalog.WORKLOADS):
            assert record.workloads.get(name) == f"{record.package}.{name}", \
                f"{api}: {name}.py is not its record's module for {name}"
    for name, workload in catalog.WORKLOADS.items():
        assert not set(workload.not_applicable) & set(workload.apis), name
        assert set(workload.not_applicable) <= set(catalog.APIS), name


def test_not_applicable_apis_are_planned_with_their_declared_reason():
    axes = dict(catalog.AXIS_DEFAULTS)
    for name, workload in catalog.WORKLOADS.items():
        for api, reason in workload.not_applicable.items():
            assert catalog.not_applicable_reason(name, api, None, axes, workload.tasks[0]) == reason


def test_workload_declarations_are_consistent():
    for name, workload in catalog.WORKLOADS.items():
        assert set(workload.tasks) <= set(catalog.TASKS), name
        assert set(workload.precisions) <= set(catalog.PRECISIONS), name
        assert workload.family in catalog.FAMILIES, name
        for size, preset in workload.sizes.items():
            assert size in catalog.SIZES and set(preset) <= set(workload.options), (name, size)


def test_every_rule_is_about_a_declared_axis():
    assert catalog.RULES
    for axis, _ in catalog.RULES:
        assert axis is None or axis in catalog.AXES


def test_every_consumer_reads_the_axis_declarations():
    names = tuple(catalog.AXES)
    settings = catalog.setting_axes()
    assert names[:2] == ("task", "batch_size") and settings == names[2:]
    assert schema.AXES == names                                         # validated
    assert set(names) <= set(schema.BenchmarkSpec.model_fields)         # a benchmark's key
    assert spec_axis_drift() == {}                                      # carried to the worker
    assert set(names) <= set(RECORD_FIELDS) and set(names) <= set(schemas.RECORD_TYPES)
    assert summaries.AXIS_KEYS == settings                              # reported
    start = files.CSV_COLUMNS.index("task")
    assert files.CSV_COLUMNS[start:start + len(names)] == names         # in summary.csv
    for name in settings:
        axis = catalog.AXES[name]
        assert catalog.AXIS_DEFAULTS[name] == axis.default
        assert schema.check_axis(name, axis.values[0] if axis.values else 1 if axis.kind ==
                                 "positive_int" else True)


def spec_axis_drift(spec: type = CellSpec, axes: dict | None = None) -> dict[str, object]:
    """How CellSpec's axis fields (those from "task" on, as many as the catalog has axes)
    differ from the catalog's axes: names in order, and each field's type against the axis's
    declared type (empty when they agree)."""
    axes = catalog.AXES if axes is None else axes
    hints = typing.get_type_hints(spec)
    names = [f.name for f in dataclasses.fields(spec)]
    start = names.index("task")
    declared = names[start:start + len(axes)]
    drift: dict[str, object] = {}
    if declared != list(axes):
        drift["names"] = (declared, list(axes))
    defaults = {f.name: f.default for f in dataclasses.fields(spec)}
    for name, axis in axes.items():
        if name in hints and hints[name] != axis.type:
            drift[name] = (hints[name], axis.type)
        elif defaults.get(name, dataclasses.MISSING) not in (dataclasses.MISSING, axis.default):
            drift[name] = ("default", defaults[name], axis.default)      # an old spec's value
    return drift


def test_the_cell_spec_declares_every_axis_with_its_type():
    assert spec_axis_drift() == {}
    # ... and says so when the catalog gains an axis the spec does not declare, or the types
    # differ (a copy of the catalog's axes, so the real one is untouched)
    toy = catalog.Axis("toy", "choice", str, "plain", ("plain", "fancy"))
    assert spec_axis_drift(axes={**catalog.AXES, "toy": toy})["names"][1][-1] == "toy"
    retyped = dataclasses.replace(catalog.AXES["jit"], type=bool)
    assert spec_axis_drift(axes={**catalog.AXES, "jit": retyped}) == {"jit": (bool | str, bool)}
    redefaulted = dataclasses.replace(catalog.AXES["devices"], default=2)
    assert spec_axis_drift(axes={**catalog.AXES, "devices": redefaulted}) == {
        "devices": ("default", 1, 2)}


def test_a_cell_carries_every_setting_axis(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[environments.numpy]\nimage = "numpy"\napi = "numpy"\n'
                    '[[benchmarks]]\nworkload = "matmul"\n', encoding="utf-8")
    cell = matrix.load(path).cells[0]
    assert tuple(cell.axes) == catalog.setting_axes()
    assert cell.axes == catalog.AXIS_DEFAULTS


# --- a toy axis and a toy workload, added to a copy of the runner ------------------------------

TOY_AXIS = '''
declare_axis(Axis("toy", "choice", str, "plain", ("plain", "fancy"), help="a toy axis"))
'''
TOY_RULE = '''

@rule("toy")
def toy_fancy_on_numpy_only(c: Where) -> str | None:
    return "toy = fancy runs on NumPy only" if c.axes["toy"] == "fancy" and c.api != "numpy" \\
        else None
'''
TOY_WORKLOAD = '''
declare_workload(Workload(
    "toy", ("run",), False, ("float32",), {"n": Option(int, "elements", True)},
    help="a toy: the cumulative sum of n seeded numbers", family="ops",
    sizes={"full": {"n": 64}, "small": {"n": 32}, "tiny": {"n": 16}}))
'''
TOY_MODULE = '''"""The toy workload with NumPy."""

import numpy as np

from ...bench import Bench
from .. import answers, seeded


def build(spec, fw) -> Bench:
    (x,) = seeded.normal(spec.seed, (spec.options["n"],))
    return Bench(step=lambda: np.cumsum(x), items_per_step=spec.options["n"],
                 answer=lambda: answers.output(np.cumsum(x)))
'''


def copy_of_the_runner(tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(ROOT / "runner", root / "runner",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def insert_after(path: Path, anchor: str, text: str, times: int = 1) -> None:
    """`text` after `anchor` (a line, or a part of one) of a module of the copy (after each of
    `times`)."""
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == times, (path, anchor)
    path.write_text(source.replace(anchor, anchor + text), encoding="utf-8")


def changed_files(copy: Path) -> set[str]:
    """The files of the copy's runner/ that differ from (or are not in) this checkout's."""
    out = set()
    for path in (copy / "runner").rglob("*.py"):
        relative = path.relative_to(copy)
        original = ROOT / relative
        if not original.exists() or original.read_bytes() != path.read_bytes():
            out.add(str(relative))
    return out


def run_matrix(copy: Path, benchmarks: list[dict], environments: dict | None = None,
               **run_keys: typing.Any) -> subprocess.CompletedProcess:
    """The copy's runner on `benchmarks` in a matrix whose environments are this interpreter as
    NumPy and as torch (only planned: torch never runs here), or `environments`; `run_keys`:
    more keys of [run]."""
    (copy / "toy.toml").write_text(matrix_text(
        "toy", steps=2, settle=0, profile=None, **run_keys,
        environments=environments or {"numpy": this_interpreter(),
                                      "torch": this_interpreter("torch")},
        benchmarks=benchmarks), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "runner", "toy.toml", "--executor", "local",
                           "--results-dir", str(copy / "results")], cwd=copy,
                          capture_output=True, text=True, timeout=300)


def results_of(copy: Path) -> tuple[list[dict], list[dict]]:
    (run,) = (copy / "results" / "toy").iterdir()
    records = [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]
    with (run / "summary.csv").open(newline="") as handle:
        return records, list(csv.DictReader(handle))


def test_a_toy_axis_declared_in_the_catalog_is_validated_planned_carried_and_shown(tmp_path):
    copy = copy_of_the_runner(tmp_path)
    catalog_dir = copy / "runner" / "worker" / "catalog"
    append(catalog_dir / "axes.py", TOY_AXIS)
    append(catalog_dir / "rules.py", TOY_RULE)
    # its typed fields: the worker's spec and the record's coordinates
    # CellSpec's field, and WorkerResult's (the worker copies the spec into its result)
    insert_after(copy / "runner" / "worker" / "protocol.py", "    device: str\n", "    toy: str\n",
                 times=2)
    # the record's type of it (CellCoordinates, declared with the record)
    insert_after(copy / "runner" / "worker" / "protocol.py", "    device: str | None\n",
                 "    toy: str | None\n")
    assert changed_files(copy) == {"runner/worker/catalog/axes.py",
                                   "runner/worker/catalog/rules.py",
                                   "runner/worker/protocol.py"}
    bench = {"workload": "matmul", "options": {"n": 8}}

    wrong = run_matrix(copy, [{**bench, "toy": "fancey"}])
    assert wrong.returncode == 2, wrong.stderr
    assert "benchmarks[0].toy: 'fancey' is not one of 'plain', 'fancy' (did you mean 'fancy'?)" \
        in wrong.stderr

    done = run_matrix(copy, [{**bench, "toy": ["plain", "fancy"], "environments": ["numpy"]},
                             {**bench, "toy": "fancy", "environments": ["torch"]}])
    assert done.returncode == 0, done.stdout + done.stderr
    records, rows = results_of(copy)
    assert {(r["environment"], r["toy"], r["status"]) for r in records} == {
        ("numpy", "plain", "ok"), ("numpy", "fancy", "ok"), ("torch", "fancy", "not_applicable")}
    fancy_torch = next(r for r in records if r["environment"] == "torch" and r["toy"] == "fancy")
    assert "toy = fancy runs on NumPy only" in fancy_torch["error"]
    assert {r["toy"] for r in rows} == {"plain", "fancy"}
    assert any("-toy=fancy-" in r["cell_name"] for r in rows)


def test_a_toy_workload_touches_its_catalog_entry_its_apis_record_and_its_module(tmp_path):
    copy = copy_of_the_runner(tmp_path)
    append(copy / "runner" / "worker" / "catalog" / "workloads.py", TOY_WORKLOAD)
    # the API that runs it names its module (one entry of NumPy's record)
    insert_after(copy / "runner" / "worker" / "catalog" / "apis.py",
                 '    {**ARRAY_RECIPES, "selftest": "numpy_api.selftest"', ', "toy": "numpy_api.toy"')
    (copy / "runner" / "worker" / "apis" / "numpy_api" / "toy.py").write_text(TOY_MODULE)
    assert changed_files(copy) == {"runner/worker/catalog/workloads.py",
                                   "runner/worker/catalog/apis.py",
                                   "runner/worker/apis/numpy_api/toy.py"}

    done = run_matrix(copy, [{"workload": "toy", "size": ["tiny", "small"]}])
    assert done.returncode == 0, done.stdout + done.stderr
    records, rows = results_of(copy)
    ok = sorted((r for r in records if r["status"] == "ok"), key=lambda r: r["options"]["n"])
    assert [r["options"]["n"] for r in ok] == [16, 32] and all(r["answer"] for r in ok)
    assert {r["error"] for r in records if r["environment"] == "torch"} \
        >= {"toy has no torch implementation"}
    assert [r["workload"] for r in rows] == ["toy"] * 4


# --- a toy API: its package and one declaration ------------------------------------------------

TOY_API = '''
declare_api(Api(
    "toy", "Toy", "numpy", ("numpy",),
    {"selftest": "numpy_api.selftest", "matmul": "matmul_common"},
    quantizer=lacks("the toy quantizes nothing"), data_parallel=lacks("the toy runs on one device"),
    sharded_dataset=lacks("the toy has no dataset pipeline"),
    steps_per_execution=lacks("the toy has no steps_per_execution"),
    ops_compile=lacks("the toy compiles nothing"),
))
'''
TOY_PACKAGE = '''"""A toy API: NumPy's arrays under another name."""

from ..numpy_api import Framework as NumPy


class Framework(NumPy):
    name = "toy"
'''


def test_a_toy_api_is_its_package_and_one_declaration_and_runs_end_to_end(tmp_path):
    copy = copy_of_the_runner(tmp_path)
    append(copy / "runner" / "worker" / "catalog" / "apis.py", TOY_API)
    package = copy / "runner" / "worker" / "apis" / "toy_api"
    package.mkdir()
    (package / "__init__.py").write_text(TOY_PACKAGE)
    assert changed_files(copy) == {"runner/worker/catalog/apis.py",
                                   "runner/worker/apis/toy_api/__init__.py"}
    matmul = {"workload": "matmul", "options": {"n": 8}}
    done = run_matrix(copy, [{"workload": "selftest", "options": {"sleep_ms": 1.0}},
                             matmul, {**matmul, "tf32": True}, {**matmul, "devices": 2},
                             {**matmul, "jit": True}, {"workload": "cnn", "batch_size": 8}],
                      environments={"toy": this_interpreter("toy")})
    assert done.returncode == 0, done.stdout + done.stderr
    records, _ = results_of(copy)
    status = {(r["workload"], r.get("tf32"), r.get("devices"), r.get("jit")):
              (r["status"], r.get("error")) for r in records}
    assert status[("selftest", None, 1, "auto")][0] == "ok"
    assert status[("matmul", None, 1, "auto")][0] == "ok"
    ok = [r for r in records if r["status"] == "ok"]
    assert {r["api"] for r in ok} == {"toy"} and all(r["answer"] for r in ok)
    # every capability it lacks: not applicable with the record's reason (its engine's first)
    assert status[("matmul", True, 1, "auto")] == ("not_applicable", "NumPy has no TF32 mode")
    assert status[("matmul", None, 2, "auto")] == ("not_applicable",
                                                    "the toy runs on one device")
    assert status[("matmul", None, 1, True)] == ("not_applicable",
                                                  "NumPy has no compiler (jit must be false)")
    assert status[("cnn", None, 1, "auto")] == ("not_applicable", "cnn has no toy implementation")


# --- a toy setting, declared once in the cell spec --------------------------------------------

def test_every_setting_of_the_spec_names_a_run_key_that_exists():
    declared = protocol.settings_fields()
    assert {"min_time_s", "max_time_s", "calibration_sizes", "harness_overhead"} <= set(declared)
    for name, spec_field in declared.items():
        run_key = spec_field.metadata[protocol.SETTING]["run_key"]
        assert run_key is None or run_key in schema.RunSettings.model_fields, name
    run = schema.RunSettings(min_time=2.0, max_time=9.0)
    assert protocol.settings_from(run, harness_overhead=True) == {
        "min_time_s": 2.0, "max_time_s": 9.0, "calibration_sizes": [], "harness_overhead": True}
    # a coordinate setting changes the id only where it differs from its default
    assert protocol.coordinate_settings(protocol.settings_from(run)) == {}
    assert protocol.coordinate_settings(protocol.settings_from(calibration_sizes=[8])) == {
        "calibration_sizes": [8]}


TOY_SETTINGS = '''\
    toy_knob: int = setting(3, run_key="toy_knob")
    toy_words: str = setting("as declared")
'''


def test_a_toy_setting_declared_in_the_spec_reaches_the_worker(tmp_path):
    copy = copy_of_the_runner(tmp_path)
    insert_after(copy / "runner" / "worker" / "protocol.py",
                 "    harness_overhead: bool = setting(False, coordinate=True)\n", TOY_SETTINGS)
    assert changed_files(copy) == {"runner/worker/protocol.py"}
    # one with a [run] key: the matrix's table declares the key too (validated, documented)
    insert_after(copy / "runner" / "schema" / "tables.py", "    lock_clocks: Any = False\n",
                 "    toy_knob: int = 3\n")
    done = run_matrix(copy, [{"workload": "matmul", "options": {"n": 8},
                              "environments": ["numpy"]}], toy_knob=5)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (copy / "results" / "toy").iterdir()
    (spec_file,) = (run / "work").glob("*/spec.json")
    spec = json.loads(spec_file.read_text())
    assert (spec["toy_knob"], spec["toy_words"]) == (5, "as declared")     # what the worker read
    records, _ = results_of(copy)
    assert [(r["toy_knob"], r["toy_words"], r["status"]) for r in records] == [
        (5, "as declared", "ok")]


# --- data-parallel cells (the devices axis; docs/scaling.md) ----------------------------------

def devices_reason(workload: str, api: str, backend: str | None = None, task: str = "fit",
                   batch_size: int | None = 64, **axes) -> str | None:
    chosen = {**catalog.AXIS_DEFAULTS, "devices": 2, **axes}
    return catalog.not_applicable_reason(workload, api, backend, chosen, task, batch_size)


def test_every_framework_shards_the_cnn_and_bert_fit_but_keras_on_torch():
    for api, backend in (("keras", "jax"), ("keras", "tensorflow"), ("tf-keras", None),
                         ("torch", None), ("jax", None), ("tensorflow", None)):
        assert devices_reason("cnn", api, backend) is None, (api, backend)
    for api, backend in (("keras", "jax"), ("keras", "tensorflow"), ("tf-keras", None),
                         ("hf", None)):
        assert devices_reason("bert", api, backend) is None, (api, backend)
    assert "keras.distribution has no torch backend" in devices_reason("cnn", "keras", "torch")
    assert devices_reason("cnn", "keras", "torch", devices=1) is None     # one device: as ever


def test_data_parallel_cells_that_do_not_exist_are_na_with_the_reason():
    assert devices_reason("matmul", "torch", task="run") == \
        "matmul has no data-parallel recipe (devices > 1 runs the CNN, BERT and user workloads)"
    assert devices_reason("cnn", "numpy") is not None
    assert devices_reason("bert", "keras", "jax", task="predict") is None      # Keras shards it
    assert devices_reason("bert", "hf", task="predict").startswith("DDP shards training")
    assert "no sharded pipeline" in devices_reason("cnn", "torch", data="dataset")
    assert devices_reason("cnn", "keras", "jax", data="dataset") is None   # fit distributes it
    assert devices_reason("cnn", "torch", devices=4, scaling="strong", batch_size=30) == (
        "batch_size 30 does not split evenly over 4 devices (strong scaling: batch_size is the "
        "global batch)")
    assert devices_reason("cnn", "torch", devices=4, scaling="strong", batch_size=32) is None
    assert devices_reason("cnn", "torch", devices=4, batch_size=30) is None   # weak: 30 each
