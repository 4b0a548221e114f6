"""The runner's versions, as far as its numbers go. Computed on the host from the files the
workers run (the worker folder is mounted into containers and shipped to Ray nodes as is).

**Method version** (`method_version(...)`, per cell): a digest of the worker code that one cell
runs and of the host's part of the timing method (TIMING_METHOD). It is the comparability key
of a record (metadata `method_version`) and a coordinate of the cell id: a change to how a cell
is measured reads as "not comparable" (and as a marked method change on the history's trends),
never as the framework getting faster or slower (asv marks benchmarks whose code changed the
same way), while an update that leaves a cell's code alone leaves its id and its history as
they were.

Which files belong to a cell (`cell_files`): what `python -m runner.worker` imports for it.

- The worker's entry point, `__main__.py`, and every module it imports, followed through the
  imports of each (`from .x import y`, `from . import x`, lazy imports inside functions
  included): the clock (`bench.py`), the protocol, the telemetry, the metadata, the data-parallel
  launcher, the profiler, `apis/__init__.py` (FrameworkBase) and the catalog. Every cell runs
  these, so a code change in any of them changes every cell's version.
- The catalog's `workloads.py` and `apis.py` are the files taken in part: their statements
  other than the `declare_workload(Workload("<name>", ...))` and `declare_api(Api("<name>",
  ...))` calls, and the calls that declare the cell's own workload and API (and its backend's,
  whose package a Keras cell runs). Adding (or changing) another workload's or API's
  declaration changes no other cell; the rest of the catalog (the shapes, axes, rules,
  precisions) counts whole.
- The API's package, `apis/<api>_api/__init__.py` (its Framework; the API's record names it),
  and what it imports. A cell of an API with backends (Keras 3) also runs its backend's native
  package (the backend's own API record's; keras_api/__init__.py imports it); with no backend
  known, every backend's.
- The module the API's record names for the workload (`apis/<api>_api/<workload>.py`, or a
  shared recipe such as `apis/matmul_common.py`), and what it imports (its recipe, e.g.
  `apis/cnn_common.py`, `apis/kerashub/`). A user workload's cell runs `apis/user_common.py`
  instead (and `user_code.py`); the user's own code has its own digest (`workload_sha256`,
  runner/schema/workload_code.py), a coordinate of its own.
- Importing a module runs its packages' `__init__.py`: those count too.

When in doubt a file belongs to the cell: a set too wide only costs a trend's continuity, one
too narrow would hide a change of method. Each file counts by its syntax tree without comments
and docstrings (`normalized`), so editing a comment or a docstring changes no version.

**Runner version** (`runner_version()`): the same digest over every worker file and
TIMING_METHOD, for information (the manifest, a record's metadata, `history list`) and for
`--resume`, which continues only a run folder made by the same runner.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

WORKER_DIR = Path(__file__).resolve().parent / "worker"

# The host's part of how a number is taken (the worker's part is its code). Change this text
# whenever the host changes it, so that every version changes with it.
TIMING_METHOD = ("repeats in fresh processes; blocks of calls with one device synchronisation "
                 "per block; one block size per cell, calibrated by its first repeat and handed "
                 "to the others")

ENTRY = "__main__.py"                       # every cell's: the clock, protocol, shared core
WORKLOADS_FILE = "catalog/workloads.py"     # counted per workload (cell_source)
APIS_FILE = "catalog/apis.py"               # counted per API (cell_source)
DIGITS = 12


def api_package(api: str) -> str:
    """The API's package under apis/ (its record's rule, for any root)."""
    return api.replace("-", "_") + "_api"


def workload_module(api: str, workload: str) -> str:
    """The file of the module that builds `workload` on `api`: the one the API's record names,
    else the package's module of the workload's name (a root of another runner's worker)."""
    from .worker import catalog

    record = catalog.API_RECORDS.get(api)
    module = record.workloads.get(workload) if record else None
    return (module or f"{api_package(api)}.{workload}").replace(".", "/") + ".py"


def backend_packages(api: str, backend: str | None) -> list[str]:
    """The native packages a cell of an API with backends also runs: its backend's, or every
    backend's when none is known."""
    from .worker import catalog

    record = catalog.API_RECORDS.get(api)
    backends = record.backends if record else ()
    natives = (backend,) if backend in backends else backends
    return [api_package(native) for native in natives]


@functools.cache
def method_version(api: str, workload: str, backend: str | None = None, user: bool = False,
                   root: Path = WORKER_DIR) -> str:
    """12 hex digits of sha256 over TIMING_METHOD and the normalized source of every file of
    `cell_files` (path and syntax tree)."""
    digest = hashlib.sha256(TIMING_METHOD.encode())
    own = {WORKLOADS_FILE: {None if user else workload}, APIS_FILE: {api, backend}}
    for name in cell_files(api, workload, backend, user, root):
        digest.update(b"\0" + name.encode() + b"\0")
        digest.update(cell_source(root, name, own.get(name)))
    return digest.hexdigest()[:DIGITS]


@functools.cache
def runner_version(root: Path = WORKER_DIR) -> str:
    """12 hex digits of sha256 over TIMING_METHOD and every worker file, normalized."""
    digest = hashlib.sha256(TIMING_METHOD.encode())
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        digest.update(b"\0" + name.encode() + b"\0")
        digest.update(file_source(root, name))
    return digest.hexdigest()[:DIGITS]


def cell_files(api: str, workload: str, backend: str | None = None, user: bool = False,
               root: Path = WORKER_DIR) -> list[str]:
    """The worker files (relative to `root`, sorted) that a cell of `api` × `workload` runs:
    the module docstring says which and why."""
    package = f"apis/{api_package(api)}"
    entries = [ENTRY, f"{package}/__init__.py",
               "apis/user_common.py" if user else f"apis/{workload_module(api, workload)}"]
    entries += [f"apis/{native}/__init__.py" for native in backend_packages(api, backend)]
    return sorted(closure([e for e in entries if (root / e).is_file()], root))


def closure(entries: Iterable[str], root: Path) -> set[str]:
    """The files `entries` import, transitively, within `root` (with their packages'
    __init__.py)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [n for n in imported_files(root, name) | packages_of(root, name) if n not in seen]
    return seen


def packages_of(root: Path, name: str) -> set[str]:
    """The __init__.py of every package above a file (importing it runs them)."""
    parts = PurePosixPath(name).parts[:-1]
    found = {"/".join((*parts[:n], "__init__.py")) for n in range(1, len(parts) + 1)}
    return {n for n in found if (root / n).is_file()}


@functools.cache
def imported_files(root: Path, name: str) -> set[str]:
    """The files of `root` that one file imports: relative imports, and absolute ones of
    runner.worker.*, wherever they stand (a lazy import inside a function counts)."""
    here = list(PurePosixPath(name).parts[:-1])     # its package (an __init__.py's: its own)
    targets: list[list[str]] = []
    for node in ast.walk(parsed(root, name)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else list(here)
            elif (node.module or "").startswith("runner.worker"):
                base = []
            else:
                continue
            module = [p for p in (node.module or "").split(".") if p]
            if not node.level:
                module = module[2:]           # runner.worker.x → x
            targets.append(base + module)
            targets += [base + module + [alias.name] for alias in node.names]
        elif isinstance(node, ast.Import):
            targets += [alias.name.split(".")[2:] for alias in node.names
                        if alias.name.startswith("runner.worker.")]
    return {found for target in targets for found in module_file(root, target)}


@functools.cache
def parsed(root: Path, name: str) -> ast.Module:
    """A worker file's syntax tree (read once per process: a root's files do not change while
    the runner runs; tests give each changed copy a root of its own)."""
    return ast.parse((root / name).read_text(encoding="utf-8"))


def module_file(root: Path, parts: list[str]) -> list[str]:
    """A module path's file under root: parts.py or parts/__init__.py (none: a name, not a
    module)."""
    if not parts:
        return []
    stem = "/".join(parts)
    return [n for n in (f"{stem}.py", f"{stem}/__init__.py") if (root / n).is_file()]


def cell_source(root: Path, name: str, declared: set[str | None] | None) -> bytes:
    """A file's normalized source; the catalog's workloads.py and apis.py (`declared`: the names
    whose declarations count) without the other declarations (a user workload's cell: without
    any workload's)."""
    if declared is None:
        return file_source(root, name)
    tree = ast.Module(body=parsed(root, name).body, type_ignores=[])
    tree.body = [without_workloads(s) for s in tree.body
                 if declaration_of(s) is None or declaration_of(s) in declared]
    return normalized(tree)


def without_workloads(statement: ast.stmt) -> ast.stmt:
    """An API's declaration without its `workloads` mapping: which module a cell runs is in the
    digest already (that module's path and source), so adding a workload to an API changes
    none of its other cells."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and getattr(statement.value.func, "id", None) == "declare_api"):
        return statement
    from .worker.catalog import Api

    record = statement.value.args[0]
    if not isinstance(record, ast.Call):
        return statement
    position = [f.name for f in dataclasses.fields(Api)].index("workloads")
    args = [a for index, a in enumerate(record.args) if index != position]
    keywords = [k for k in record.keywords if k.arg != "workloads"]
    call = ast.Call(func=record.func, args=args, keywords=keywords)
    return ast.Expr(value=ast.Call(func=statement.value.func, args=[call], keywords=[]))


@functools.cache
def file_source(root: Path, name: str) -> bytes:
    return normalized(parsed(root, name))


DECLARERS = ("declare_workload", "declare_api")


def declaration_of(statement: ast.stmt) -> str | None:
    """The name a top-level `declare_workload(Workload("<name>", ...))` or `declare_api(Api(
    "<name>", ...))` declares, else None."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Name)
            and statement.value.func.id in DECLARERS and statement.value.args):
        return None
    inner = statement.value.args[0]
    if isinstance(inner, ast.Call) and inner.args and isinstance(inner.args[0], ast.Constant):
        return str(inner.args[0].value)
    return None


def normalized(source: str | ast.AST) -> bytes:
    """A module's syntax tree without docstrings, as bytes: comments, docstrings, blank lines
    and layout change nothing. Empty and None fields are left out, so the text does not depend
    on the Python version's ast fields (3.12's type_params, for one)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    return canonical(tree).encode()


def canonical(node: object) -> str:
    """A node as text: its type and its non-empty fields, bodies without docstrings."""
    if isinstance(node, list):
        return "[" + ",".join(canonical(item) for item in node) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    fields = []
    for field, value in ast.iter_fields(node):
        if value is None or value == [] or field in ("kind", "type_ignores"):
            continue
        if field == "body" and isinstance(value, list) and isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            value = without_docstring(value)
        fields.append(f"{field}={canonical(value)}")
    return f"{type(node).__name__}({','.join(fields)})"


def without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return body[1:]
    return body
