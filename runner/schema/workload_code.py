"""A user workload's code, read as the host may read it: the file and the modules of its folder
that it imports (followed with `ast`, transitively), each bounded in size before it is read and
parsed, never imported. Nothing else in the folder is read."""

from __future__ import annotations

import ast
from pathlib import Path

MAX_FOLDER_FILES = 10_000       # .py files in the workload's folder (listed, never read)
MAX_FILES = 200                 # modules of the workload's code
MAX_BYTES = 16 << 20            # their total size


def folder_modules(path: Path, where: str) -> dict[str, Path]:
    """The .py files beside the workload file (regular files only) by module name: the
    modules its imports may name."""
    try:
        found = sorted(p for p in path.parent.iterdir()
                       if p.suffix == ".py" and p.is_file() and not p.is_symlink())
    except OSError as exc:
        raise ValueError(f"{where}: cannot list {path.parent}: {exc.strerror}") from None
    if len(found) > MAX_FOLDER_FILES:
        raise ValueError(f"{where}: {path.parent} holds {len(found)} .py files (at most "
                         f"{MAX_FOLDER_FILES}); give the workload a folder of its own")
    return {p.stem: p for p in found}


def imported_names(tree: ast.Module) -> set[str]:
    """The top-level module names a module imports, anywhere in it (a function's own import
    included): `import a.b` and `from a import b` name `a`, `from . import b` names `b`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.module and not node.level:
                names.add(node.module.split(".")[0])
            elif node.level and not node.module:
                names |= {alias.name for alias in node.names}
    return names


def read_code(path: Path, file: str, where: str) -> tuple[dict[str, bytes], dict[str, ast.Module]]:
    """The workload's code: its file and the folder modules it imports, transitively, each read
    (sizes first: a 2 GB sparse file is refused unread) and parsed; name → bytes, name → tree."""
    if not path.exists():
        raise ValueError(f"{where}: {file!r}: no such file ({path})")
    if not path.is_file() or path.suffix != ".py":
        raise ValueError(f"{where}: {file!r} is not a Python file (.py)")
    beside = folder_modules(path, where)
    sources: dict[str, bytes] = {}
    trees: dict[str, ast.Module] = {}
    todo: list[tuple[Path, str | None]] = [(path, None)]
    total = 0
    while todo:
        module, importer = todo.pop(0)
        if module.name in sources:
            continue
        if len(sources) >= MAX_FILES:
            raise ValueError(f"{where}: {file} imports more than {MAX_FILES} modules of its "
                             "folder")
        data = read_bounded(module, MAX_BYTES - total, where, path.parent)
        total += len(data)
        sources[module.name] = data
        trees[module.name] = parse(module, data, where, importer)
        todo += [(beside[name], module.name) for name in sorted(imported_names(trees[module.name]))
                 if name in beside and beside[name].name not in sources]
    return sources, trees


def read_bounded(module: Path, room: int, where: str, folder: Path) -> bytes:
    """A module's bytes, refused unread when it would take the code past MAX_BYTES."""
    too_big = ValueError(f"{where}: the workload's code (its file and the modules of {folder} "
                         f"it imports) holds more than {MAX_BYTES >> 20} MB")
    try:
        if module.stat().st_size > room:
            raise too_big
        with module.open("rb") as handle:      # bounded: a file may grow meanwhile
            data = handle.read(room + 1)
    except OSError as exc:
        raise ValueError(f"{where}: cannot read {exc.filename}: {exc.strerror}") from None
    if len(data) > room:
        raise too_big
    return data


def read_sources(path: Path, file: str, where: str) -> dict[str, bytes]:
    """The workload's code, name → bytes (read_code's)."""
    return read_code(path, file, where)[0]


def parse(path: Path, source: bytes, where: str, importer: str | None = None) -> ast.Module:
    """A module of the workload's code, parsed; `importer`: the module that imports it, when
    it is not the workload's file (the error says why a file the user did not name counts)."""
    name = path.name if importer is None else f"{path.name} (imported by {importer})"
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        # An encoding or a NUL byte is no line's (lineno 0 or None): the file is named alone.
        line = f" line {exc.lineno}" if exc.lineno else ""
        raise ValueError(f"{where}: {name}{line}: not Python: {exc.msg}") from None
    except ValueError as exc:                       # NUL bytes
        raise ValueError(f"{where}: {name}: not Python: {exc}") from None
    except (RecursionError, MemoryError):           # 20 000 unary minus signs: the parser's stack
        raise ValueError(f"{where}: {name}: Python nested too deeply for the parser "
                         "(expressions inside each other)") from None
