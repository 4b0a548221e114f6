"""The shape of the house: no import cycle anywhere in runner/, renderers fed by the analysis and
never by each other, the host never importing a framework, the worker never importing the host;
each stage importing only what comes before it (the matrix nothing of what runs it, a run's data
nothing of its analysis, the analysis no renderer); executors never importing results/ or the
run (runner/run/, where scheduling is), and no module outside executors/ telling executors apart
by name (they read the capability flags of executors/base.py); argparse stopping at the command
layer (runner/cli.py, runner/commands/); modules and functions small. Each rule is shown to catch
a planted violation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT

RUNNER = REPO_ROOT / "runner"
RENDERERS = {"runner.results.render." + name for name in
             ("terminal", "markdown", "html", "files", "plots", "compare")}
FRAMEWORKS = {"torch", "jax", "jaxlib", "tensorflow", "keras", "tf_keras", "keras_hub", "flax",
              "transformers", "diffusers", "peft", "accelerate", "huggingface_hub"}


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


# --- the tree tells the pipeline: a stage imports only what comes before it ---------------------

# matrix (schema/) → run (run/, on machine/, environments/, executors/) → results: data/ (what a
# run leaves) → analysis/ (what it says) → render/ (how it is shown); history/ keeps results.
STAGES = {
    "runner.schema": ("runner.run", "runner.machine", "runner.environments", "runner.executors",
                      "runner.results", "runner.history", "runner.commands", "runner.cli"),
    "runner.results.data": ("runner.results.analysis", "runner.results.render"),
    "runner.results.analysis": ("runner.results.render",),
}


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether `module` is one of `packages` or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def later_stages(name: str, imports: set[str]) -> set[str]:
    """What module `name` imports of a stage that comes after its own."""
    forbidden = tuple(f for stage, later in STAGES.items() if within(name, (stage,)) for f in later)
    return {m for m in imports if within(m, forbidden)}


def test_each_stage_imports_only_what_comes_before_it():
    for path in RUNNER.rglob("*.py"):
        found = later_stages(module_name(path), imports_of(path))
        assert not found, f"{module_name(path)} imports a later stage: {sorted(found)}"


@pytest.mark.parametrize("module, planted, caught", [
    ("runner.results.analysis.effects", "from ..render.terminal import tables\n",
     "runner.results.render.terminal"),
    ("runner.results.data.records", "from ..analysis import stats\n", "runner.results.analysis"),
    ("runner.results.data.store", "from ..render import write\n", "runner.results.render"),
    ("runner.schema.matrix", "from ..run.plan import Plan\n", "runner.run.plan"),
    ("runner.schema.tables", "from ..results.data.types import Record\n",
     "runner.results.data.types"),
])
def test_the_stage_rule_catches_a_planted_import(module, planted, caught):
    package = module.rpartition(".")[0]
    assert caught in later_stages(module, imports_in(planted, package))


def test_the_stage_rule_leaves_earlier_stages_alone():
    fine = ("from ..data.types import Record\nfrom ..formatting import fmt\n"
            "from ...machine.profile import cv_for\n")
    assert later_stages("runner.results.analysis.x", imports_in(fine, "runner.results.analysis")) \
        == set()
    assert later_stages("runner.results.render.x",
                        imports_in("from ..analysis import stats\n", "runner.results.render")) \
        == set()


# --- renderers only format: the analysis is the report model's (analysis/report_model.py) -----

# What the report model computes once; a renderer reads its fields instead. write.py, which
# builds the model, is the one module of render/ that may call them.
RECOMPUTED = {"keras_table": {"keras_view"},
              "native": {"keras_over_native", "best_of", "best_columns", "native_titles",
                         "sentences"},
              "summaries": {"tf32_rows", "pivot", "fixed_costs"},
              "effects": {"analyse", "keras_speedups", "speedup"},
              "speedups": {"keras_speedups", "speedup"},
              "findings": {"sentences", "method_sentence"}, "scaling": {"scaling_rows"},
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
               "x = native.keras_over_native(v) + f.sentences(s) + native.ratio_cell(r)\n")
    assert recomputed_in(planted) == {"native.keras_over_native", "findings.sentences",
                                      "keras_table.keras_view", "summaries.tf32_rows"}


# --- executors: one contract, read by its flags -------------------------------------------------

EXECUTORS = "runner.executors"
EXECUTOR_KINDS = {"local", "docker", "ray"}     # executors/kinds.py KINDS, "auto" apart
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


def _names_an_executor(node: ast.AST) -> bool:
    """An expression that stands for an executor or its name: x.name, or anything that
    mentions an executor (setup.executor, opts.executor, manifest.get("executor"))."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        return True
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and "executor" in part.id.lower() or \
                isinstance(part, ast.Attribute) and "executor" in part.attr.lower() or \
                isinstance(part, ast.Constant) and part.value == "executor":
            return True
    return False


def _is_an_executor_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in EXECUTOR_KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_an_executor_kind(item) for item in node.elts)
    return False


def executor_name_checks(source: str) -> list[int]:
    """Lines of `source` that compare an executor (or its name) with an executor's kind."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            kinds = [o for o in operands if _is_an_executor_kind(o)]
            others = [o for o in operands if not _is_an_executor_kind(o)]
            if kinds and any(_names_an_executor(o) for o in others):
                found.append(node.lineno)
    return found


def test_no_module_outside_executors_tells_executors_apart_by_name():
    for path in RUNNER.rglob("*.py"):
        if module_name(path).startswith(EXECUTORS):
            continue
        lines = executor_name_checks(path.read_text(encoding="utf-8"))
        assert not lines, f"{module_name(path)} compares an executor's name on lines {lines}: " \
                          "read a capability flag of executors/base.py instead"


@pytest.mark.parametrize("planted", [
    'if setup.executor.name == "ray":\n    pass\n',
    'if executor.name != "local":\n    pass\n',
    'ok = self.executor.name in ("local", "docker")\n',
    'if manifest.get("executor") not in ("local", "docker"):\n    pass\n',
    'if opts.executor == "docker":\n    pass\n',
])
def test_the_executor_name_rule_catches_a_planted_check(planted):
    assert executor_name_checks(planted) == [1]


def test_the_executor_name_rule_leaves_other_names_alone():
    assert executor_name_checks('same = cell.name == other.name\nkind = kind == "auto"\n'
                                'remote = not executor.on_this_host\n') == []


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
