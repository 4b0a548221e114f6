"""User workloads: a matrix's [workloads.<name>] tables, whose code lives in the user's own file.

The host never imports a user's file. It parses it with `ast` to learn which functions it
defines, so validation knows the APIs and tasks that apply before anything runs. The workload's
code is the file and the modules of its folder that it imports (`import helpers`, `from helpers
import x`, anywhere in the file; followed with `ast`, transitively): those are read, parsed and
hashed — an edit changes the cell ids and reads as "not comparable" — and a read-only copy of
them is staged into the run folder (workloads/<sha256[:12]>/), from where every executor hands
them to the worker (the worker's side: runner/worker/apis/user_common.py). Nothing else in the
folder counts: an unrelated script beside it, broken or edited, changes nothing.

What a file defines (docs/user-workloads.md has the whole contract):
- `keras_model(spec)` and `keras_data(spec)`: fit and predict on every Keras API (Keras 3 on each
  backend, Keras 2), run by the runner's own Keras loop;
- `<api>_<task>(spec)` (torch_fit, jax_predict, tensorflow_run, numpy_run, keras_generate, ...):
  returns a callable that performs one step;
- optional hooks: items_per_step(spec), flops_per_step(spec), answer(spec, output).
"""

from __future__ import annotations

import ast
import os
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..paths import folder_in_run
from ..worker import catalog
from ..worker.protocol import UserWorkloadEntry
from ..worker.user_code import STAGED_ENV, digest
from .workload_code import read_code, read_sources

__all__ = ["STAGED", "STAGED_ENV", "UserWorkload", "read", "stage"]

# A function name's API part, as each API's record names it (tf-keras → tf_keras_fit).
API_PREFIXES = {record.function_prefix: name for name, record in catalog.API_RECORDS.items()}
# The APIs whose cells run a Keras model (keras_model and keras_data).
KERAS_APIS = tuple(name for name, record in catalog.API_RECORDS.items() if record.keras)
MODEL_FUNCTIONS = ("keras_model", "keras_data")
MODEL_TASKS = ("fit", "predict")
HOOKS = ("items_per_step", "flops_per_step", "answer")
# Module names a workload file (or a module beside it) may not take: the worker imports these
# (every API's modules, as its record names them, and the worker's own), and the folder of the
# user's files is on its import path.
RESERVED_MODULES = frozenset({"runner", "numpy", "psutil", "pynvml", "sitecustomize",
                              "usercustomize"}
                             | {m for r in catalog.API_RECORDS.values() for m in r.imports})
STAGED = "workloads"            # the run folder's folder of staged copies


@dataclass(frozen=True)
class UserWorkload:
    """A user workload as the host knows it: where its code is, its digest, what it defines."""

    name: str
    file: str                       # as the matrix names it
    path: Path                      # the file, absolute
    sha256: str                     # of the file's name and its code (the modules it imports)
    modules: tuple[str, ...]        # its code's .py files, by name
    functions: tuple[str, ...]      # the module-level names the file defines
    defaults: dict[str, Any]        # its options' default values
    workload: catalog.Workload = field(repr=False)

    @property
    def module(self) -> str:
        return self.path.stem

    @property
    def folder(self) -> str:
        """The staged copy's folder under the run folder's workloads/."""
        return self.sha256[:12]

    def spec_entry(self) -> UserWorkloadEntry:
        """What the cell spec (and so every record) carries of it."""
        return {"name": self.name, "file": self.file, "module": self.module,
                "folder": self.folder, "sha256": self.sha256, "defaults": dict(self.defaults)}

    def manifest_entry(self) -> dict[str, Any]:
        return {"file": str(self.path), "sha256": self.sha256, "staged": f"{STAGED}/{self.folder}",
                "modules": list(self.modules), "tasks": list(self.workload.tasks),
                "apis": {api: dict(tasks) for api, tasks in self.workload.api_tasks.items()},
                "hooks": [h for h in HOOKS if h in self.functions]}


def defined_names(tree: ast.Module) -> set[str]:
    """The module-level names a file defines: functions, assignments, imports (a `from helpers
    import torch_fit` counts as defining torch_fit)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def string_constants(tree: ast.Module) -> set[str]:
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def api_tasks(names: set[str], tasks: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Per API, each of `tasks` the file implements and how ("model" or "step")."""
    has_model = all(f in names for f in MODEL_FUNCTIONS)
    out: dict[str, dict[str, str]] = {}
    for prefix, api in API_PREFIXES.items():
        for task in tasks:
            if f"{prefix}_{task}" in names:
                out.setdefault(api, {})[task] = "step"
            elif api in KERAS_APIS and has_model and task in MODEL_TASKS:
                out.setdefault(api, {})[task] = "model"
    return out


def check_functions(names: set[str], tasks: tuple[str, ...], where: str, file: str,
                    found: dict[str, dict[str, str]]) -> None:
    half = [f for f in MODEL_FUNCTIONS if f in names]
    if len(half) == 1:
        missing = MODEL_FUNCTIONS[1 - MODEL_FUNCTIONS.index(half[0])]
        raise ValueError(f"{where}.file: {file} defines {half[0]} but no {missing} (a Keras "
                         f"workload needs both)")
    for task in tasks:
        if not any(task in by_task for by_task in found.values()):
            model = "keras_model and keras_data, or " if task in MODEL_TASKS else ""
            raise ValueError(f"{where}.tasks: {file} defines no function for {task!r} "
                             f"({model}{', '.join(f'{p}_{task}' for p in API_PREFIXES)})")


def contract_arity(name: str) -> int | None:
    """How many positional arguments the worker passes to a function of the file's contract
    (answer: spec and output; the others: spec), or None for a name outside the contract."""
    if name == "answer":
        return 2
    if name in MODEL_FUNCTIONS or name in HOOKS:
        return 1
    prefix, _, task = name.rpartition("_")
    return 1 if prefix in API_PREFIXES and task in catalog.TASKS else None


def check_signatures(tree: ast.Module, where: str, file: str) -> None:
    """Each contract function the file defines with `def` accepts what the worker passes: a
    wrong signature is one line before the run, not a TypeError in every repeat's cell."""
    for node in tree.body:
        # A decorator may change what the function takes: only plain `def`s are judged.
        if not isinstance(node, ast.FunctionDef) or node.decorator_list:
            continue
        wanted = contract_arity(node.name)
        if wanted is None:
            continue
        args = node.args
        positional = len(args.posonlyargs) + len(args.args)
        required = positional - len(args.defaults)
        required_keywords = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults,
                                                          strict=True) if default is None]
        if required_keywords or required > wanted or (positional < wanted and not args.vararg):
            takes = "(spec, output)" if wanted == 2 else "(spec)"
            raise ValueError(f"{where}.file: {file} line {node.lineno}: {node.name} is called "
                             f"as {node.name}{takes}, but it is def {node.name}"
                             f"({shown_arguments(args)})")


SHOWN_SIGNATURE = 200       # characters of a wrong signature an error shows


def shown_arguments(args: ast.arguments) -> str:
    """A signature as the error shows it: bounded, and a default nested too deeply to write
    back (hundreds of operators inside each other) said to be one."""
    try:
        text = ast.unparse(args)
    except RecursionError:
        return "… (a default nested too deeply to show)"
    return text if len(text) <= SHOWN_SIGNATURE else text[:SHOWN_SIGNATURE] + "…"


def check_options(defaults: dict[str, Any], strings: set[str], where: str, file: str) -> None:
    for name in defaults:
        if name not in strings:
            raise ValueError(f"{where}.options.{name}: {file} never reads it (no string "
                             f"{name!r} in its code: the file and the modules it imports)")


def check_module_names(sources: dict[str, bytes], where: str, own: str) -> None:
    """Module names the worker can import without shadowing anything it imports itself (`own`:
    the workload's file, named as itself; the others are modules beside it)."""
    for name in sources:
        stem = name[:-3]
        if not stem.isidentifier():
            what = "is no module name"
        elif stem in RESERVED_MODULES:
            what = "shares its name with a package the worker imports"
        elif stem in sys.stdlib_module_names:
            what = "shares its name with a standard-library module"
        else:
            continue
        which = "the workload's file" if name == own else f"{name}, a module beside it,"
        raise ValueError(f"{where}.file: {which} {what} ({stem}); rename it")


def read(name: str, file: str, tasks: tuple[str, ...], defaults: dict[str, Any],
         pinned: str | None, base: Path, where: str = "") -> UserWorkload:
    """A [workloads.<name>] table's file, read, checked and declared (ValueError: one line
    naming the key, `where` its path: workloads.<name> by default)."""
    where = where or f"workloads.{name}"
    try:
        return read_checked(name, file, tasks, defaults, pinned, base, where)
    except (RecursionError, MemoryError):    # whatever walk of its code went too deep: the
        # file's nesting, never the matrix's (whose own is reported as TOML's)
        raise ValueError(f"{where}.file: {file}: Python nested too deeply to read "
                         "(expressions inside each other)") from None


def read_checked(name: str, file: str, tasks: tuple[str, ...], defaults: dict[str, Any],
                 pinned: str | None, base: Path, where: str) -> UserWorkload:
    path = Path(os.path.expanduser(file))
    # Resolved: a link's target is the code, and the modules beside the target its folder.
    path = (path if path.is_absolute() else base / path).resolve()
    sources, trees = read_code(path, file, f"{where}.file")
    check_module_names(sources, where, path.name)
    names = defined_names(trees[path.name])
    found = api_tasks(names, tasks)
    check_functions(names, tasks, where, file, found)
    check_signatures(trees[path.name], where, file)
    check_options(defaults, set().union(*map(string_constants, trees.values())), where, file)
    sha = digest(path.name, sources)
    if pinned is not None and pinned != sha:
        raise ValueError(f"{where}.sha256: {file} and the modules it imports hash to "
                         f"{sha[:12]}…, the matrix pins {pinned[:12]}… (the code changed)")
    workload = catalog.Workload(
        name, tasks, needs_batch_size=bool(set(tasks) - {"run"}),
        precisions=catalog.PRECISIONS,
        options={key: catalog.Option(float if isinstance(v, float) else type(v),
                                     f"{file}: default {v!r}")
                 for key, v in defaults.items()},
        uses_data_axis=True, help=f"user workload from {file}", family="user",
        # Either dense path may carry its FLOPs: TF32 is judged by both switches.
        dense_paths=("matmul", "conv"), origin=file, api_tasks=found)
    return UserWorkload(name, file, path, sha, tuple(sorted(sources)), tuple(sorted(names)),
                        dict(defaults), workload)


def stage(workloads: list[UserWorkload], run_dir: Path) -> None:
    """Read-only copies of each workload's code under run_dir/workloads/, checked against its
    digest (a file edited since the matrix was read is refused: ValueError)."""
    for user in workloads:
        target = folder_in_run(run_dir, STAGED) / user.folder
        if target.is_symlink():
            raise ValueError(f"{target}: is a symbolic link; a run folder holds none (it "
                             "could point anywhere)")
        if target.is_dir():
            continue                         # a resumed run staged it already
        sources = read_sources(user.path, user.file, f"workloads.{user.name}.file")
        if digest(user.path.name, sources) != user.sha256:
            raise ValueError(f"workloads.{user.name}.file: {user.file} changed while the run "
                             "was starting; run it again")
        partial = Path(tempfile.mkdtemp(prefix=f".{user.folder}.", dir=target.parent))
        for module, data in sources.items():
            out = partial / module
            out.write_bytes(data)
            out.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)      # read-only files
        partial.chmod(0o755)                # mkdtemp's 0700 would hide it from a container
        partial.rename(target)              # whole or not at all


def staged_matrix(resolved: dict[str, Any], workloads: list[UserWorkload]) -> dict[str, Any]:
    """The run folder's copy of the matrix: each user workload's `file` is its staged copy
    (relative to the run folder), so that the copy runs again from the run folder alone
    (`reproduce`, another machine); its sha256 pins the code."""
    if not workloads:
        return resolved
    copy = {**resolved, "workloads": {k: dict(v) for k, v in resolved["workloads"].items()}}
    for user in workloads:
        copy["workloads"][user.name]["file"] = f"{STAGED}/{user.folder}/{user.path.name}"
    return copy
