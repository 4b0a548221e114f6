"""Wording left from earlier rounds: a workload file that is not Python for a reason no line has
(an encoding, a NUL byte) is named without `line 0` or `line None`; `lock` names a folder given
as a path as what it is (never `images//abs/…`); a workload file that shadows a module is called
the workload's file, not a module "beside it"."""

from __future__ import annotations

import pytest

from tests.hostile.test_hostile_runs import main, one_line
from tests.matrices import matrix_text, this_interpreter


def user_workload(tmp_path, name: str, source: bytes):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / name).write_bytes(source)
    matrix = tmp_path / "m.toml"
    matrix.write_text(matrix_text("w", environments={"host": this_interpreter()}, tables={
        "workloads": {"w": {"file": f"bench/{name}", "tasks": ["run"]}}},
        benchmarks=[{"workload": "w", "environments": ["host"]}]))
    return matrix


@pytest.mark.parametrize("source, said", [
    (b"# -*- coding: bogus -*-\ndef numpy_run(spec):\n    return lambda: 1\n",
     "bench.py: not Python: unknown encoding: bogus"),
    (b"\xef\xbb\xbf# coding: latin-1\ndef numpy_run(spec):\n    return lambda: 1\n",
     "bench.py: not Python: encoding problem: iso-8859-1 with BOM"),
])
def test_a_file_that_is_not_python_for_no_lines_reason_names_no_line(source, said, tmp_path,
                                                                      capsys):
    line = one_line(*main(capsys, "plan", user_workload(tmp_path, "bench.py", source))[::2])
    assert line.endswith(f"workloads.w.file: {said}"), line
    assert "line 0" not in line and "line None" not in line


def test_a_workload_file_that_shadows_a_module_is_named_as_the_file(tmp_path, capsys):
    matrix = user_workload(tmp_path, "json.py", b"def numpy_run(spec):\n    return lambda: 1\n")
    line = one_line(*main(capsys, "plan", matrix)[::2])
    assert line.endswith("workloads.w.file: the workload's file shares its name with a "
                         "standard-library module (json); rename it"), line


@pytest.mark.parametrize("given", ["/tmp", "../numpy"])
def test_lock_names_a_folder_given_as_a_path_as_it_is(given, capsys):
    line = one_line(*main(capsys, "lock", "--check", given)[::2])
    assert "images//" not in line and line.startswith(f"error: runner lock: {given}: not a "
                                                      "folder of "), line
    assert line.endswith("(name an image folder, e.g. numpy)")
