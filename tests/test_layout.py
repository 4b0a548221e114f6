"""The shape of the house: no import cycle anywhere in runner/, renderers fed by the summaries and
never by each other, the host never importing a framework, the worker never importing the host."""

from __future__ import annotations

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "runner"
RENDERERS = {"terminal", "markdown", "html", "files", "plots", "compare"}
FRAMEWORKS = {"torch", "jax", "jaxlib", "tensorflow", "keras", "tf_keras", "keras_hub", "flax"}


def module_name(path: Path) -> str:
    parts = path.relative_to(RUNNER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, absolute (relative imports resolved), at any depth."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    for renderer in RENDERERS:
        name = f"runner.results.{renderer}"
        others = {f"runner.results.{r}" for r in RENDERERS - {renderer}}
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
