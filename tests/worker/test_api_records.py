"""Every framework API is one declared record (runner/worker/catalog/apis.py), and every feature
reads it: no module outside the catalog and an API's own package compares API names (a rule
shown to catch planted violations); the modules the worker imports for an API are the ones its
record names (mypy's list of frameworks and the user workloads' reserved module names hold every
record's); and a capability a record lacks makes a cell that asks for it not applicable with the
record's reason — shown on every shipped API and on a toy engine and API declared here, so that
a new one fails closed. A toy API added to a copy of the runner runs end to end:
tests/worker/test_catalog.py."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from runner.run.profiles import no_profiler
from runner.schema import matrix
from runner.schema.user_workloads import RESERVED_MODULES
from runner.worker import catalog
from runner.worker.catalog import api_base

RUNNER = REPO_ROOT / "runner"
APIS_DIR = RUNNER / "worker" / "apis"
CATALOG = RUNNER / "worker" / "catalog"


# --- no API name compared outside the catalog and the API's own package -----------------------

def api_names() -> set[str]:
    return set(catalog.API_RECORDS) | set(catalog.ENGINES)


def _constants(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {value for item in node.elts for value in _constants(item)}
    return set()


def api_name_checks(source: str, names: set[str]) -> list[int]:
    """Lines of `source` that compare something with an API's (or engine's) name, key a dict by
    one, or bind one to a name (`NATIVE_API = "hf"`, compared later)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        found: set[str] = set()
        if isinstance(node, ast.Compare):
            found = {v for operand in (node.left, *node.comparators) for v in _constants(operand)}
        elif isinstance(node, ast.Dict):
            found = {v for key in node.keys if key is not None for v in _constants(key)}
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            found = _constants(node.value)
        if found & names:
            lines.append(node.lineno)
    return sorted(set(lines))


def allowed(path: Path) -> bool:
    """The catalog, and an API's own package, may name APIs."""
    relative = path.relative_to(RUNNER / "worker").parts if path.is_relative_to(
        RUNNER / "worker") else ()
    packages = {record.package for record in catalog.API_RECORDS.values()}
    return relative[:1] == ("catalog",) or relative[:2] in {("apis", p) for p in packages}


def test_no_module_outside_the_catalog_and_an_apis_package_names_an_api():
    names = api_names()
    for path in sorted(RUNNER.rglob("*.py")):
        if allowed(path):
            continue
        lines = api_name_checks(path.read_text(encoding="utf-8"), names)
        assert not lines, f"{path.relative_to(REPO_ROOT)} names an API on lines {lines}: read " \
                          "a field of its record (runner/worker/catalog/apis.py) instead"


@pytest.mark.parametrize("planted", [
    'if spec.api == "keras":\n    pass\n',
    'ok = summary["api"] in ("torch", "hf")\n',
    'KINDS = {"jax": 1, "torch": 2}\n',
    'NATIVE_API = "hf"\n',
    'if backend != "jax":\n    pass\n',
])
def test_the_api_name_rule_catches_a_planted_check(planted):
    assert api_name_checks(planted, api_names()) == [1]


def test_the_api_name_rule_leaves_other_names_and_the_allowed_places_alone():
    assert api_name_checks('same = cell.api == other.api\nkind = kind == "auto"\n'
                           'folder = root / "jax"\nx = {"n": 1}\n', api_names()) == []
    assert allowed(CATALOG / "rules.py") and allowed(APIS_DIR / "keras_api" / "cnn.py")
    assert not allowed(APIS_DIR / "user_common.py")
    assert not allowed(RUNNER / "results" / "analysis" / "keras_table.py")


# --- what the worker imports is what the records name -------------------------------------------

def test_mypy_and_the_reserved_module_names_hold_every_records_imports():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    untyped = {module for override in config["tool"]["mypy"]["overrides"]
               for module in override["module"]}
    for name, record in catalog.API_RECORDS.items():
        for module in record.imports:
            if importlib.util.find_spec(module) is None:     # not the host's (NumPy is)
                assert {module, f"{module}.*"} <= untyped, f"{name}: mypy does not know {module}"
            assert module in RESERVED_MODULES, f"{name}: a user's {module}.py would shadow it"


def test_every_api_package_imports_only_what_its_record_names():
    """The frameworks a package's modules import (besides the standard library, NumPy and the
    runner) are its record's imports, and those of the APIs whose packages it builds on."""
    known = {m for record in catalog.API_RECORDS.values() for m in record.imports} - {"numpy"}
    for record in catalog.API_RECORDS.values():
        allowed_modules = set(record.imports) | {
            m for other in catalog.API_RECORDS.values() if other.engine == record.engine
            or other.name in record.backends for m in other.imports}
        for path in (APIS_DIR / record.package).glob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found = {alias.name.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.Import) for alias in node.names}
            found |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and not node.level}
            assert found & known <= allowed_modules, f"{path}: {found & known - allowed_modules}"


# --- an absent capability is not applicable, with the record's reason ---------------------------

@dataclasses.dataclass(frozen=True)
class Ask:
    """A cell that asks for one capability: the workload, task and axes that need it."""

    field: str
    workload: str
    task: str
    axes: dict

    def reason(self, api: str, backend: str | None) -> str | None:
        axes = {**catalog.AXIS_DEFAULTS, **self.axes}
        return catalog.not_applicable_reason(self.workload, api, backend, axes, self.task,
                                             batch_size=32)


ENGINE_ASKS = [Ask("compiler", "matmul", "run", {"jit": True}),
               Ask("tf32", "matmul", "run", {"tf32": True}),
               Ask("gpu", "matmul", "run", {"device": "gpu"})]
API_ASKS = [Ask("quantizer", "cnn", "predict", {"precision": "int8"}),
            Ask("data_parallel", "cnn", "fit", {"devices": 2}),
            Ask("steps_per_execution", "cnn", "fit", {"steps_per_execution": 8}),
            Ask("ops_compile", "matmul", "run", {"jit": True})]


def first_workload(record: catalog.Api, wanted: str) -> str | None:
    """The workload an ask uses where the API runs it (else another it runs, of the same kind:
    a model for the model asks, any for the array ones)."""
    if wanted in record.workloads:
        return wanted
    models = [w for w in record.workloads if catalog.WORKLOADS[w].family in ("model", "hub")]
    return models[0] if wanted == "cnn" and models else None


def each_lacking(records: dict[str, catalog.Api]) -> Iterator[tuple[str, str | None, Ask, str]]:
    """(api, backend, ask, the record's reason) for every capability a record lacks, where the
    API runs a workload that can ask for it."""
    for name, declared in records.items():
        for backend in declared.backends or (None,):
            record = declared.on(backend)
            engine = record.engine_record
            for ask in ENGINE_ASKS + API_ASKS:
                owner = engine if ask in ENGINE_ASKS else record
                capability = getattr(owner, ask.field)
                workload = first_workload(record, ask.workload)
                if capability or workload is None:
                    continue
                task = ask.task if ask.task in catalog.WORKLOADS[workload].tasks \
                    else catalog.WORKLOADS[workload].tasks[0]
                yield name, backend, dataclasses.replace(ask, workload=workload, task=task), \
                    capability.reason


def test_every_capability_a_shipped_record_lacks_is_na_with_its_reason():
    seen = set()
    for api, backend, ask, reason in each_lacking(dict(catalog.API_RECORDS)):
        got = ask.reason(api, backend)
        assert got is not None, f"{api}/{backend}: {ask.field} lacking, yet planned to run"
        # an earlier rule may answer first (NumPy has no compiler before keras.ops's switch)
        seen.add((api, backend, ask.field, got == reason))
    assert ("keras", "torch", "data_parallel", True) in seen
    assert ("keras", "torch", "steps_per_execution", True) in seen
    assert ("jax", None, "quantizer", True) in seen
    assert ("numpy", None, "tf32", True) in seen and ("numpy", None, "gpu", True) in seen


@pytest.fixture
def toy_records() -> Iterator[catalog.Api]:
    """A toy engine lacking every capability, and a toy API on it lacking every one of its own,
    declared for one test (the registries restored after)."""
    engine = api_base.declare_engine(catalog.Engine(
        "toyengine", "Toy", "toy.Array", catalog.lacks("the toy has no profiler"),
        catalog.lacks("the toy has no compiler"), catalog.lacks("the toy has no TF32"),
        catalog.lacks("the toy has no GPU"), process_per_device=False))
    toy = catalog.declare_api(catalog.Api(
        "toy", "Toy", engine.name, ("toy",), {"cnn": "toy_api.cnn", "matmul": "matmul_common"},
        quantizer=catalog.lacks("the toy quantizes nothing"),
        data_parallel=catalog.lacks("the toy runs on one device"),
        sharded_dataset=catalog.lacks("the toy has no pipeline"),
        steps_per_execution=catalog.lacks("the toy has no steps_per_execution"),
        ops_compile=catalog.lacks("the toy's arrays compile nothing")))
    try:
        yield toy
    finally:
        del catalog.API_RECORDS["toy"], catalog.ENGINES["toyengine"]


def test_a_new_engine_and_api_fail_closed_for_every_capability_they_lack(toy_records):
    lacking = {ask.field: (ask, reason) for api, _, ask, reason
               in each_lacking({"toy": toy_records})}
    assert set(lacking) == {a.field for a in ENGINE_ASKS + API_ASKS}
    for field, (ask, reason) in lacking.items():
        got = ask.reason("toy", None)
        if field == "ops_compile":        # the engine's missing compiler is asked first
            assert got == "the toy has no compiler"
        else:
            assert got == reason, field
    cell = matrix.Cell(environment="toy", api="toy", backend=None, image=None,
                       workload="matmul", task="run", batch_size=1,
                       axes=dict(catalog.AXIS_DEFAULTS), options={}, env={}, steps=2,
                       warmup_steps=1, repeats=1, timeout=60.0, python="python3")
    assert no_profiler(cell) == "the toy has no profiler"


def test_a_capability_says_how_or_why_never_both_nor_neither():
    with pytest.raises(ValueError):
        catalog.Capability()
    with pytest.raises(ValueError):
        catalog.Capability(how="x", reason="y")
    assert catalog.has("torch.compile") and not catalog.lacks("no compiler")


def test_every_api_field_without_a_default_is_a_capability_or_an_identity():
    """An API's capabilities have no default: a record that forgets one does not declare."""
    required = {f.name for f in dataclasses.fields(catalog.Api)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    capabilities = {f.name for f in dataclasses.fields(catalog.Api)
                    if f.type in ("Capability", catalog.Capability)}
    assert capabilities <= required
    assert {"quantizer", "data_parallel", "steps_per_execution"} <= capabilities
