"""The shape of the house: no import cycle anywhere in runner/, renderers fed by the analysis and
never by each other, the host never importing a framework, the worker never importing the host;
every package of runner/ in one ordered table of layers (LAYERS), each module importing only its
own layer and those below it, inside functions too (the matrix nothing of what runs it, a run's
data nothing of its analysis, the analysis no renderer, the pipeline nothing of what drives it);
executors never importing results/ or the run (runner/run/, where scheduling is), no module
telling executors apart by their kind (they read the capability flags of executors/base.py),
executors made by their kind alone (registered once, in executors/kinds.py, which alone lists
the kinds and makes one by its class); argparse stopping at the command layer (runner/cli.py,
runner/commands/);
modules and functions small. Each rule is shown to catch a planted violation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.executors import kinds
from runner.paths import REPO_ROOT
from runner.worker import catalog

RUNNER = REPO_ROOT / "runner"
RENDERERS = {"runner.results.render." + name for name in
             ("terminal", "markdown", "html", "files", "plots", "compare", "ab", "issue")}
# What the worker imports for an API (its record's imports; NumPy is the host's too).
FRAMEWORKS = {module for record in catalog.API_RECORDS.values() for module in record.imports} \
    - {"numpy"}


def module_name(path: Path) -> str:
    parts = path.relative_to(RUNNER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, absolute (relative imports resolved), at any depth."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package)


def imports_in(source: str, package: str) -> set[str]:
    """Every module `source` imports, relative imports resolved against `package`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[:len(parent) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in RUNNER.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in files and m != name}
            for name, path in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """The first import cycle found by a depth-first walk (as a closed path), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_the_old_report_plots_cycle():
    # The flat layout's cycle: report → plots → report (through store on the way).
    old = {"runner.report": {"runner.store", "runner.plots"}, "runner.plots": {"runner.report"},
           "runner.store": {"runner.record"}, "runner.record": set()}
    assert find_cycle(old) == ["runner.plots", "runner.report", "runner.plots"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_runner():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_renderers_never_import_each_other():
    edges = graph()
    for name in RENDERERS:
        others = RENDERERS - {name}
        assert not edges[name] & others, f"{name} imports {edges[name] & others}"


def test_host_never_imports_a_framework_and_the_worker_never_the_host():
    for path in RUNNER.rglob("*.py"):
        name = module_name(path)
        top = {m.split(".")[0] for m in imports_of(path)}
        if not name.startswith("runner.worker"):
            assert not top & FRAMEWORKS, f"{name} imports {top & FRAMEWORKS}"
        else:
            host = {m for m in imports_of(path) if m.startswith("runner.") and
                    not m.startswith("runner.worker")}
            assert not host, f"{name} imports host modules {host}"
    assert (RUNNER / "__init__.py").read_text(encoding="utf-8").strip() == ""


# --- the layers: every package of runner/ in one order, imported only downwards ----------------

# Bottom to top (docs/layout.md states the same table). A module imports only its own layer and
# those below it; imports inside functions count (imports_in walks the whole tree). What drives
# the run pipeline as a whole (studies/) sits above run/, never inside a package the pipeline
# uses; the manifest is laid out by the run, so results/ reads it without importing run/.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("runner.worker",),                 # runs inside each environment: no host module
    ("runner.errors", "runner.settings", "runner.paths", "runner.version",
     "runner.timestamps"),              # what every stage shares
    ("runner.schema",),                 # the matrix, read into cells
    ("runner.cost",),                   # prices and the estimate: offline arithmetic
    ("runner.environments",),           # where an environment comes from
    ("runner.machine",),                # what the host has, its state, its noise profile
    ("runner.executors",),              # where a cell runs
    ("runner.results",),                # formatting.py: the one number format
    ("runner.results.data",),           # what a run leaves
    ("runner.results.analysis",),       # what the records say
    ("runner.results.render",),         # how it is shown
    ("runner.history",),                # the results database
    ("runner.run",),                    # a run, as named steps
    ("runner.studies",),                # what drives the whole run: doctor, noise, bisect, reproduce
    ("runner.commands",),               # one module per subcommand
    ("runner.cli", "runner.manual", "runner.__main__"),   # the command line, the manual
)
# Packages whose every subpackage is a layer of its own (a new one must be placed by name).
LAYERED = ("runner", "runner.results")


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether `module` is one of `packages` or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the most specific entry that `module` is or lies in; None for the
    root package itself (runner/__init__.py, empty) and for what is not runner's."""
    found, longest = None, -1
    for index, layer in enumerate(LAYERS):
        for entry in layer:
            if within(module, (entry,)) and len(entry) > longest:
                found, longest = index, len(entry)
    return found


def upward_imports(name: str, imports: set[str]) -> set[str]:
    """What module `name` imports of a layer above its own."""
    own = layer_of(name)
    assert own is not None, f"{name} is in no layer: place its package in LAYERS"
    return {m for m in imports if (theirs := layer_of(m)) is not None and theirs > own}


def all_upward_imports() -> dict[str, list[str]]:
    found = {}
    for path in sorted(RUNNER.rglob("*.py")):
        name = module_name(path)
        if name != "runner" and (up := upward_imports(name, imports_of(path))):
            found[name] = sorted(up)
    return found


def test_no_module_imports_a_higher_layer():
    # None may remain. Before issue 48, 18 import statements in 6 modules reached up:
    # machine/doctor.py, machine/noise.py and machine/repeats.py (doctor and its --measure) and
    # history/bisect.py drove run/ from packages below it (now runner/studies/, with
    # run/reproduce.py), results/data/manifest.py built the manifest from run objects (now
    # run/manifest.py), cost/history_times.py read the history (now history/times.py).
    assert all_upward_imports() == {}


def unplaced(modules: set[str], packages: set[str]) -> set[str]:
    """What LAYERS does not place among `modules` (of which `packages` are packages): a module in
    no layer, and a top-level module or package of a LAYERED package that LAYERS does not name
    (a new package of results/ would otherwise take results/'s layer unseen)."""
    entries = {entry for layer in LAYERS for entry in layer}
    found = {m for m in modules if m != "runner" and layer_of(m) is None}
    for name in modules:
        for parent in LAYERED:
            if name.startswith(parent + "."):
                child = parent + "." + name[len(parent) + 1:].split(".")[0]
                if (parent == "runner" or child in packages) and child not in entries:
                    found.add(child)
    return found


def test_every_package_of_runner_is_placed_in_one_layer():
    entries = [entry for layer in LAYERS for entry in layer]
    assert len(entries) == len(set(entries)), "an entry of LAYERS is listed twice"
    for entry in entries:
        path = RUNNER.parent / entry.replace(".", "/")
        assert path.is_dir() or path.with_suffix(".py").is_file(), f"stale entry {entry}"
    modules = {module_name(p) for p in RUNNER.rglob("*.py")}
    packages = {module_name(p) for p in RUNNER.rglob("__init__.py")}
    assert unplaced(modules, packages) == set()


def test_the_placement_rule_catches_an_unplaced_package_or_module():
    modules = {"runner.newstage.x", "runner.results.newpart.y", "runner.loose",
               "runner.results.formatting", "runner.worker.apis.torch_api.cnn"}
    packages = {"runner.newstage", "runner.results.newpart", "runner.worker.apis"}
    assert unplaced(modules, packages) == {"runner.newstage", "runner.newstage.x",
                                           "runner.results.newpart", "runner.loose"}
    assert layer_of("runner") is None
    assert layer_of("runner.results.render.html") == layer_of("runner.results.render")
    assert layer_of("runner.worker.apis.torch_api.cnn") == 0
    with pytest.raises(AssertionError, match="no layer"):
        upward_imports("runner.newstage.x", set())


@pytest.mark.parametrize("module, planted, caught", [
    # as the modules issue 48 moved up did: run/ driven or read from below it
    ("runner.machine.noise", "from ..run import pipeline\n", "runner.run.pipeline"),
    ("runner.machine.doctor", "def diagnose():\n    from ..run.setup import choose_setup\n",
     "runner.run.setup"),
    ("runner.history.bisect", "def measure():\n    if True:\n        from ..run import pipeline\n",
     "runner.run.pipeline"),
    ("runner.results.data.manifest", "from ...run.plan import Plan\n", "runner.run.plan"),
    # the estimate reading the history, inside a function
    ("runner.cost.estimate", "def past():\n    from ..history.db import engine_for\n",
     "runner.history.db"),
    ("runner.machine.checks", "from ..executors.containers import GPU_CAPABILITIES\n",
     "runner.executors.containers"),
    ("runner.run.pipeline", "from ..studies import noise\n", "runner.studies.noise"),
    ("runner.studies.noise", "from ..commands.options import PROFILES\n", "runner.commands.options"),
    ("runner.commands.run", "from ..cli import main\n", "runner.cli"),
    ("runner.worker.bench", "import runner.settings\n", "runner.settings"),
    ("runner.errors", "from .schema import matrix\n", "runner.schema.matrix"),
    # the stages of the results, and the matrix before what runs it
    ("runner.results.analysis.effects", "from ..render.terminal import tables\n",
     "runner.results.render.terminal"),
    ("runner.results.data.records", "from ..analysis import stats\n", "runner.results.analysis"),
    ("runner.results.data.store", "from ..render import write\n", "runner.results.render"),
    ("runner.results.formatting", "from .data import store\n", "runner.results.data.store"),
    ("runner.schema.matrix", "from ..run.plan import Plan\n", "runner.run.plan"),
    ("runner.schema.tables", "from ..results.data.types import Record\n",
     "runner.results.data.types"),
    ("runner.executors.local", "from ..results.data.records import Outcome\n",
     "runner.results.data.records"),
])
def test_the_layer_rule_catches_a_planted_import(module, planted, caught):
    package = module.rpartition(".")[0]
    assert caught in upward_imports(module, imports_in(planted, package))


def test_the_layer_rule_leaves_its_own_and_lower_layers_alone():
    fine = {
        "runner.results.analysis.x": "from ..data.types import Record\n"
                                     "from ..formatting import fmt\n"
                                     "from ...machine.profile import cv_for\n",
        "runner.results.render.x": "from ..analysis import stats\nfrom ...cost import prices\n",
        "runner.studies.x": "from ..run import pipeline\nfrom ..history import tables\n",
        "runner.history.x": "from ..cost.estimate import PastCell\n"
                            "from ..results.render import plots\n",
        "runner.machine.x": "from ..environments import Flavour\nfrom .. import settings\n",
        "runner.settings": "from .errors import UsageError\n",       # its own layer
        "runner.commands.x": "def main():\n    from ..studies import doctor\n",
        "runner.manual": "from .cli import build_parser\n",
    }
    for module, source in fine.items():
        package = module.rpartition(".")[0]
        assert upward_imports(module, imports_in(source, package)) == set(), module


# --- renderers only format: the analysis is the report model's (analysis/report_model.py) -----

# What the report model computes once; a renderer reads its fields instead. write.py, which
# builds the model, is the one module of render/ that may call them.
RECOMPUTED = {"keras_table": {"keras_view"},
              "native": {"keras_over_native", "best_of", "best_columns", "native_titles",
                         "sentences"},
              "summaries": {"tf32_rows", "pivot", "fixed_costs"},
              "effects": {"analyse", "keras_speedups", "speedup"},
              "speedups": {"keras_speedups", "speedup"},
              "findings": {"of", "method_sentence"}, "scaling": {"scaling_rows"},
              "reference": {"beside"}, "cost": {"price_of", "sentences", "price_ratio"},
              "profiles": {"biggest_gap"}, "conditions": {"to_act_on"},
              "decoding": {"keras_titles"}}


def recomputed_in(source: str) -> set[str]:
    """The analysis functions of RECOMPUTED a render module imports or calls (module.name)."""
    found, modules = set(), {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "analysis":
            parts = (node.module or "").split(".")
            for alias in node.names:
                if len(parts) == 1:                  # from ..analysis import native
                    modules[alias.asname or alias.name] = alias.name
                elif alias.name in RECOMPUTED.get(parts[1], set()):
                    found.add(f"{parts[1]}.{alias.name}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.attr in RECOMPUTED.get(modules.get(node.value.id, ""), set()):
            found.add(f"{modules[node.value.id]}.{node.attr}")
    return found


def test_renderers_never_recompute_what_the_report_model_holds():
    for path in sorted((RUNNER / "results" / "render").glob("*.py")):
        if path.name != "write.py":
            found = recomputed_in(path.read_text(encoding="utf-8"))
            assert not found, f"{module_name(path)} recomputes {sorted(found)}: read the model"


def test_the_recompute_rule_catches_a_planted_call():
    planted = ("from ..analysis import native, findings as f\n"
               "from ..analysis.keras_table import keras_view\n"
               "from ..analysis.summaries import TIME_KEY, tf32_rows\n"
               "x = native.keras_over_native(v) + f.of(s) + native.ratio_cell(r)\n")
    assert recomputed_in(planted) == {"native.keras_over_native", "findings.of",
                                      "keras_table.keras_view", "summaries.tf32_rows"}


# --- executors: one contract, read by its flags -------------------------------------------------

EXECUTORS = "runner.executors"
EXECUTOR_KINDS = {"local", "docker", "ray"}     # executors/kinds.py REGISTRY (a test says so)
NOT_FOR_EXECUTORS = ("runner.results", "runner.run")


def forbidden_executor_imports(imports: set[str]) -> set[str]:
    return {m for m in imports if within(m, NOT_FOR_EXECUTORS)}


def test_executors_never_import_results_or_the_run():
    for path in (RUNNER / "executors").rglob("*.py"):
        found = forbidden_executor_imports(imports_of(path))
        assert not found, f"{module_name(path)} imports {found}"


def test_the_executor_import_rule_catches_a_planted_import():
    planted = "from ..results.data.records import Outcome\nfrom ..run import scheduling\n"
    found = forbidden_executor_imports(imports_in(planted, EXECUTORS))
    assert {"runner.results.data.records", "runner.run.scheduling"} <= found
    assert not forbidden_executor_imports(imports_in("from .base import Outcome\n", EXECUTORS))


def _is_an_executor_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in EXECUTOR_KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_an_executor_kind(item) for item in node.elts)
    return False


def executor_name_checks(source: str) -> list[int]:
    """Lines of `source` that compare a value with an executor's kind: an executor's name
    (setup.executor.name == "ray") or any other (kind == "docker": the if-chain a registry
    replaces)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_an_executor_kind(o) for o in operands):
                found.append(node.lineno)
    return found


def test_no_module_tells_executors_apart_by_name():
    for path in RUNNER.rglob("*.py"):
        lines = executor_name_checks(path.read_text(encoding="utf-8"))
        assert not lines, f"{module_name(path)} compares an executor's kind on lines {lines}: " \
                          "read a capability flag of executors/base.py, or make one by its " \
                          "kind (executors/kinds.py)"


@pytest.mark.parametrize("planted", [
    'if setup.executor.name == "ray":\n    pass\n',
    'if executor.name != "local":\n    pass\n',
    'ok = self.executor.name in ("local", "docker")\n',
    'if manifest.get("executor") not in ("local", "docker"):\n    pass\n',
    'if opts.executor == "docker":\n    pass\n',
    'if kind == "docker":\n    pass\n',
    'made = Docker(flavour) if wanted == "docker" else Local(flavour)\n',
])
def test_the_executor_name_rule_catches_a_planted_check(planted):
    assert executor_name_checks(planted) == [1]


def test_the_executor_name_rule_leaves_other_names_alone():
    assert executor_name_checks('same = cell.name == other.name\nkind = kind == "auto"\n'
                                'remote = not executor.on_this_host\n'
                                'image = kind == kinds.IMAGE_KIND\n') == []


# --- executors: registered by kind ----------------------------------------------------------------

REGISTRY_MODULE = "runner.executors.kinds"
EXECUTOR_CLASSES = {kind.cls for kind in kinds.REGISTRY.values()}
# Two layers below the executors must write the kinds out, each held to the registry by a test
# (test_the_kinds_written_below_the_executors_are_the_registrys): the matrix schema's
# [run] executor, and the variable that says how a Ray node runs its cells.
KINDS_WRITTEN_OUT = {"runner.schema.tables", "runner.settings"}


def executor_constructions(source: str) -> list[int]:
    """Lines that make an executor by its class (LocalExecutor(...), docker.DockerExecutor(...),
    kinds.executor_class(kind)(...)) instead of by its kind (kinds.create)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else None
        inner = func.func if isinstance(func, ast.Call) else None
        by_class = isinstance(inner, (ast.Name, ast.Attribute)) and \
            (inner.id if isinstance(inner, ast.Name) else inner.attr) == "executor_class"
        if name in EXECUTOR_CLASSES or by_class:
            found.append(node.lineno)
    return found


def kind_lists(source: str) -> list[int]:
    """Lines that write two or more executor kinds out together (a tuple, list or set, a
    Literal, a call's arguments): the registry's list, copied."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else \
            node.args if isinstance(node, ast.Call) else []
        if sum(isinstance(i, ast.Constant) and i.value in EXECUTOR_KINDS for i in items) >= 2:
            found.add(node.lineno)
    return sorted(found)


def test_executors_are_made_by_their_kind_and_their_kinds_listed_once():
    assert set(kinds.REGISTRY) == EXECUTOR_KINDS
    for path in RUNNER.rglob("*.py"):
        name = module_name(path)
        if name == REGISTRY_MODULE:
            continue
        source = path.read_text(encoding="utf-8")
        made = executor_constructions(source)
        assert not made, f"{name} makes an executor by its class on lines {made}: " \
                         "kinds.create(kind, ...) makes one by its kind"
        if name not in KINDS_WRITTEN_OUT:
            listed = kind_lists(source)
            assert not listed, f"{name} writes the executor kinds out on lines {listed}: " \
                               "read them from executors/kinds.py (choices(), REGISTRY)"


@pytest.mark.parametrize("planted", [
    "executor = DockerExecutor(flavour, gpu)\n",
    "return local.LocalExecutor()\n",
    "executor = kinds.executor_class(kind)(flavour, gpu)\n",
])
def test_the_registry_rule_catches_an_executor_made_by_its_class(planted):
    assert executor_constructions(planted) == [1]


@pytest.mark.parametrize("planted", [
    'KINDS = ("auto", "local", "docker", "ray")\n',
    'parser.add_argument("--executor", choices=["local", "docker"])\n',
    'executor: Literal["local", "ray"] = "local"\n',
    'parse = choice("auto", "local", "docker")\n',
])
def test_the_registry_rule_catches_a_list_of_kinds(planted):
    assert kind_lists(planted) == [1]


def test_the_registry_rule_leaves_other_calls_and_lists_alone():
    source = ('pool = ThreadPoolExecutor(max_workers=2)\nok = isinstance(x, LocalExecutor)\n'
              'executor = kinds.create(kind, flavour, gpu)\nsetup = choose_setup(m, "local")\n'
              'where = ("local", "cpu")\n')
    assert executor_constructions(source) == [] and kind_lists(source) == []


def test_the_kinds_written_below_the_executors_are_the_registrys():
    """The matrix schema and settings sit below the executors (they cannot read the
    registry): what they allow is held to it here."""
    import typing

    from runner import schema, settings

    allowed = typing.get_args(schema.RunSettings.model_fields["executor"].annotation)
    assert allowed == kinds.choices()
    on_a_node = [kinds.AUTO, *(k for k in kinds.REGISTRY if kinds.executor_class(k).on_this_host)]
    parse = settings.SETTINGS[settings.NODE_EXECUTOR].parse
    assert [parse(k) for k in on_a_node] == on_a_node
    for kind in set(kinds.REGISTRY) - set(on_a_node):
        with pytest.raises(ValueError):
            parse(kind)


# --- small modules and functions ------------------------------------------------------------------

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 350, 60
# Over the limits today, each with why; an entry goes when its module is split (the test below
# says when one is stale). Host modules only: the worker's modules live inside environments.
KNOWN_LONG = {
    # An Alembic migration is history: it is never edited once a database has run it.
    "runner.history.migrations.versions.0001_runs:upgrade",
}


def too_long(name: str, source: str, host: bool) -> set[str]:
    """`name` when the module is over MAX_MODULE_LINES (host modules), `name:function` for each
    function over MAX_FUNCTION_LINES."""
    found = {name} if host and len(source.splitlines()) > MAX_MODULE_LINES else set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
            found.add(f"{name}:{node.name}")
    return found


def all_too_long() -> set[str]:
    found = set()
    for path in RUNNER.rglob("*.py"):
        name = module_name(path)
        found |= too_long(name, path.read_text(encoding="utf-8"),
                          host=not name.startswith("runner.worker"))
    return found


def test_modules_and_functions_stay_small():
    new = all_too_long() - KNOWN_LONG
    assert not new, f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a " \
                    f"function: {sorted(new)}"


def test_the_list_of_long_ones_has_no_stale_entry():
    stale = KNOWN_LONG - all_too_long()
    assert not stale, f"now small enough: remove {sorted(stale)} from KNOWN_LONG"


def test_the_size_rule_catches_a_planted_long_function_and_module():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert too_long("m", f"def f():\n{body}", host=True) == {"m:f"}
    assert too_long("m", "x = 1\n" * (MAX_MODULE_LINES + 1), host=True) == {"m"}
    assert too_long("m", "x = 1\n" * (MAX_MODULE_LINES + 1), host=False) == set()


# --- argparse stops at the command layer -------------------------------------------------------

COMMAND_LAYER = ("runner/cli.py", "runner/commands/")


def namespace_parameters(source: str) -> list[str]:
    """Functions taking an argparse Namespace: a parameter annotated with one, or one named
    `args` whose attributes the function reads (`args.x`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for param in params:
            annotated = param.annotation is not None and "Namespace" in ast.unparse(param.annotation)
            read = param.arg == "args" and any(
                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id == "args" for n in ast.walk(node))
            if annotated or read:
                found.append(f"{node.name}({param.arg})")
    return found


def test_library_functions_take_typed_arguments_not_namespaces():
    offenders = {}
    for path in sorted(RUNNER.rglob("*.py")):
        relative = path.relative_to(RUNNER.parent).as_posix()
        if not relative.startswith(COMMAND_LAYER):
            found = namespace_parameters(path.read_text(encoding="utf-8"))
            if found:
                offenders[relative] = found
    assert offenders == {}


def test_the_namespace_rule_catches_a_planted_one():
    planted = ("import argparse\n"
               "def main(args: argparse.Namespace, console): return args.runs\n"
               "def run_bisect(engine, args, console): return args.cell\n"
               "def fine(job): args = job; return args.cell\n")
    assert namespace_parameters(planted) == ["main(args)", "run_bisect(args)"]
