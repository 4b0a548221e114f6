"""A method version per cell (runner/version.py): the digest of the worker code the cell runs.
Each test changes a copy of the real worker tree and computes the versions of every built-in
cell (workload × API × Keras backend) against it: a change reaches exactly the cells that run
the changed file, a comment or a docstring reaches none."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

from runner.schema import matrix as matrix_mod
from runner.version import WORKER_DIR, cell_files, method_version, runner_version
from runner.worker import catalog
from runner.worker.catalog import WORKLOADS

CELLS = [(api, w.name, backend) for w in WORKLOADS.values() for api in w.apis
         for backend in (catalog.KERAS_BACKENDS if api == "keras" else (None,))]


def worker_copy(tmp_path: Path, name: str, edit=None) -> Path:
    """A copy of the worker tree (its own root: versions are cached per root), edited."""
    root = tmp_path / name
    shutil.copytree(WORKER_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    if edit is not None:
        edit(root)
    return root


def versions(root: Path) -> dict[tuple, str]:
    cells = {cell: method_version(*cell, root=root) for cell in CELLS}
    cells |= {("user", api): method_version(api, "mine", user=True, root=root)
              for api in ("numpy", "torch", "keras")}
    return cells


def append(relative: str, text: str):
    def edit(root: Path) -> None:
        path = root / relative
        path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    return edit


def test_versions_are_short_digests_and_a_copy_has_the_same_ones(tmp_path):
    same = versions(worker_copy(tmp_path, "same"))
    assert same == versions(WORKER_DIR)
    assert all(len(v) == 12 and int(v, 16) >= 0 for v in same.values())
    assert len(set(same.values())) > 20           # one per cell, not one for the runner
    assert runner_version(worker_copy(tmp_path, "again")) == runner_version()


def test_a_change_to_one_api_module_changes_that_apis_cells_only(tmp_path):
    changed = "apis/jax_api/cnn.py"
    before = versions(WORKER_DIR)
    after = versions(worker_copy(tmp_path, "jax", append(changed, "\nEXTRA_SETTING = 1\n")))
    moved = {cell for cell in before if before[cell] != after[cell]}
    assert moved == {("jax", "cnn", None)}
    # ...and what decides it is the file set: every cell that runs the file, no other.
    runs_it = {cell for cell in CELLS if changed in cell_files(*cell)}
    assert moved == runs_it


def test_a_change_to_an_api_package_reaches_keras_on_that_backend(tmp_path):
    before = versions(WORKER_DIR)
    after = versions(worker_copy(tmp_path, "torch", append("apis/torch_api/__init__.py",
                                                           "\nEXTRA_SETTING = 1\n")))
    moved = {cell for cell in before if before[cell] != after[cell]}
    assert ("torch", "cnn", None) in moved and ("keras", "cnn", "torch") in moved
    assert ("keras", "cnn", "jax") not in moved and ("numpy", "matmul", None) not in moved
    assert not any(cell[0] in ("jax", "tensorflow", "numpy") for cell in moved)


def test_comments_and_docstrings_change_no_version(tmp_path):
    def edit(root: Path) -> None:
        for path in root.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            text = text.replace('"""', '"""Reworded. ', 1)       # the module's docstring
            text = text.replace("\n    def ", "\n    # a new comment\n\n    def ")
            path.write_text("# a header comment\n" + text + "\n# the end\n", encoding="utf-8")

    root = worker_copy(tmp_path, "comments", edit)
    assert (root / "bench.py").read_text() != (WORKER_DIR / "bench.py").read_text()
    assert versions(root) == versions(WORKER_DIR)
    assert runner_version(root) == runner_version()


def test_a_code_change_in_the_shared_clock_changes_every_cell(tmp_path):
    before = versions(WORKER_DIR)
    root = worker_copy(tmp_path, "clock", append("bench.py", "\nBLOCK_SLACK = 0.5\n"))
    after = versions(root)
    assert all(before[cell] != after[cell] for cell in before)
    assert runner_version(root) != runner_version()


def test_adding_a_workload_leaves_every_other_cell_alone(tmp_path):
    declaration = ('\ndeclare_workload(Workload(\n    "toy", ("run",), False, '
                   '("float32",), {}, help="a toy", family="ops"))\n')

    def edit(root: Path) -> None:
        append("catalog/workloads.py", declaration)(root)
        # NumPy's record names the toy's module: its declaration changes, its cells do not
        apis = root / "catalog/apis.py"
        apis.write_text(apis.read_text(encoding="utf-8").replace(
            '"selftest": "numpy_api.selftest"}',
            '"selftest": "numpy_api.selftest", "toy": "numpy_api.toy"}'), encoding="utf-8")
        (root / "apis/numpy_api/toy.py").write_text("def build(spec, fw):\n    return None\n")

    root = worker_copy(tmp_path, "toy", edit)
    assert versions(root) == versions(WORKER_DIR)
    assert "apis/numpy_api/toy.py" in cell_files("numpy", "toy", root=root)
    assert runner_version(root) != runner_version()      # the whole runner did change


def test_a_changed_declaration_changes_its_workloads_cells_only(tmp_path):
    def edit(root: Path) -> None:
        path = root / "catalog/workloads.py"
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace('"tiny": {"n": 256}', '"tiny": {"n": 128}'),
                        encoding="utf-8")

    before, after = versions(WORKER_DIR), versions(worker_copy(tmp_path, "preset", edit))
    moved = {cell for cell in before if before[cell] != after[cell]}
    assert moved == {cell for cell in CELLS if cell[1] == "matmul"}


def test_the_cell_files_follow_the_dispatch():
    keras_jax = cell_files("keras", "bert", "jax")
    assert {"__main__.py", "bench.py", "protocol.py", "apis/__init__.py",
            "apis/keras_api/__init__.py", "apis/keras_api/bert.py",
            "apis/jax_api/__init__.py"} <= set(keras_jax)
    assert "apis/torch_api/__init__.py" not in keras_jax
    assert "apis/keras_api/cnn.py" not in keras_jax
    assert {"apis/jax_api/__init__.py", "apis/torch_api/__init__.py",
            "apis/tensorflow_api/__init__.py"} <= set(cell_files("keras", "bert"))
    user = cell_files("numpy", "anything", user=True)
    assert {"apis/user_common.py", "user_code.py"} <= set(user)


@pytest.fixture
def ids_against(write_matrix, monkeypatch):
    """ids_against(root) -> {cell name: id} of a matrix of matmul on NumPy and Keras (JAX),
    their method versions computed against the worker tree at `root`."""
    matrix = write_matrix("""
        [[benchmarks]]
        workload = "matmul"
        environments = ["numpy", "keras-jax"]
        size = "tiny"
    """)

    def ids(root: Path) -> dict[str, str]:
        monkeypatch.setattr(matrix_mod, "method_version",
                            functools.partial(method_version, root=root))
        return {c.name: c.id for c in matrix_mod.load(matrix).cells}

    return ids


def test_a_change_to_one_apis_module_changes_its_cell_ids_only(tmp_path, ids_against):
    before = ids_against(WORKER_DIR)
    assert before == ids_against(worker_copy(tmp_path, "same"))
    after = ids_against(worker_copy(tmp_path, "keras", append("apis/keras_api/__init__.py",
                                                             "\nEXTRA_SETTING = 1\n")))
    assert len(before) == 2
    numpy_cell = next(name for name in before if "-numpy-" in name)
    keras_cell = next(name for name in before if "-keras-jax-" in name)
    assert after[numpy_cell] == before[numpy_cell]
    assert after[keras_cell] != before[keras_cell]
