"""Reproducing a run: images named by digest in the matrix, `runner reproduce` of a finished NumPy
run through the local executor (same cells, the comparison written, a changed lock refused), and
`compare` marking environments whose stacks differ. The Docker side (registry, push, pull by
digest, export/import) is in test_registry.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results.analysis import comparison as compare
from tests.fixtures import FIXTURE_RUNS
from tests.matrices import environment, matrix_text

DIGEST = "sha256:" + "ab" * 32


def env_matrix(image: str) -> str:
    return matrix_text("pinned", run_defaults=False,
                       environments={"numpy": environment("numpy", image=image)},
                       benchmarks=[{"workload": "matmul", "environments": ["numpy"],
                                    "size": "tiny"}])


@pytest.mark.parametrize("image", [f"127.0.0.1:5000/dl-bench/numpy@{DIGEST}",
                                   f"registry.example.com/team/dl-bench/numpy@{DIGEST}",
                                   f"python@{DIGEST}"])           # Docker Hub's, as docker pull
def test_an_image_named_by_digest_is_a_valid_environment_run_in_docker(image, write_matrix,
                                                                       run_cli):
    path = write_matrix(env_matrix(image), with_environments=False)
    code, out, err = run_cli("plan", path)
    assert code == 0, err
    assert "docker" in out                     # the local run hands it to the Docker executor
    assert DIGEST[:20] in out.replace("\n", "").replace("│", "").replace(" ", "")


@pytest.mark.parametrize("image, fragment", [
    ("127.0.0.1:5000/dl-bench/numpy:cpu", "name a registry image by its digest"),
    ("127.0.0.1:5000/dl-bench/numpy@sha256:abc", "name a registry image by its digest"),
    (f"127.0.0.1:5000/dl-bench/numpy@{DIGEST.upper()}", "name a registry image by its digest"),
    ("127.0.0.1:5000/Numpy@" + DIGEST, "name a registry image by its digest"),
])
def test_a_moving_tag_or_a_bad_digest_is_one_line_exit_2(image, fragment, write_matrix, run_cli,
                                                          results_dir):
    path = write_matrix(env_matrix(image), with_environments=False)
    code, out, err = run_cli(path)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"environments.numpy.image: {image!r}: {fragment}" in err
    assert list(results_dir.iterdir()) == []


def test_an_image_named_by_digest_is_refused_on_ray(write_matrix, run_cli):
    path = write_matrix(env_matrix(f"127.0.0.1:5000/dl-bench/numpy@{DIGEST}"),
                        with_environments=False)
    code, out, err = run_cli(path, "--executor", "ray", "--dry-run")
    assert code == 2
    assert err.strip() == (f"error: {path}: environments.numpy.image: an image named by digest "
                           "runs with the local or docker executor, not ray")


def test_reproduce_and_export_refuse_what_is_not_a_run_folder(tmp_path, capsys):
    assert cli.main(["reproduce", str(tmp_path / "nowhere")]) == 2
    assert cli.main(["reproduce", str(tmp_path)]) == 2
    assert cli.main(["import", str(tmp_path / "none.tar")]) == 2
    assert cli.main(["build", str(tmp_path / "m.toml"), "--push", "http://x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].endswith("no such run folder")
    assert err[1].endswith("not a run folder (needs manifest.json and cells/)")
    assert err[2].endswith("none.tar: no such archive")
    assert "--push 'http://x': expected a registry as HOST[:PORT][/PATH]" in err[3]
    assert len(err) == 4 and list(tmp_path.iterdir()) == []


# --- compare: per-environment stacks ------------------------------------------------------------

def set_metadata(run_dir: Path, environment: str, **values) -> None:
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["environment"] == environment:
            record["metadata"].update(values)
            path.write_text(json.dumps(record))


def test_compare_marks_every_row_of_an_environment_whose_lock_differs(tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE_RUNS, runs)
    set_metadata(runs / "base", "keras-jax", lock_sha256="1" * 64)
    set_metadata(runs / "same", "keras-jax", lock_sha256="2" * 64)
    result = compare.compare_runs(runs / "base", runs / "same")
    stacks = {s.environment: s for s in result.stacks}
    assert stacks["keras-jax"].differs == [f"lock_sha256 {'1' * 12}… → {'2' * 12}…"]
    assert all(s.same for name, s in stacks.items() if name != "keras-jax")
    marked = {c.cell_id for c in result.cells if c.stack_differs}
    assert marked == {c.cell_id for c in result.cells if c.environment == "keras-jax"} != set()
    assert all(c.verdict == compare.NOT_COMPARABLE for c in result.cells if c.stack_differs)

    assert cli.main(["compare", str(runs / "base"), str(runs / "same")]) == 0
    out = capsys.readouterr().out
    assert "Stacks (A → B)" in out and "same stack" in out
    assert "1 of " in out and "environments on different stacks (keras-jax)" in out
    written = (runs / "same" / "compare-base.md").read_text()
    assert f"| keras-jax | **differs: lock_sha256 {'1' * 12}… → {'2' * 12}…** |" in written
    assert "| keras-jax | **differs** |" in written


# --- reproduce a finished NumPy run (local executor, real worker processes) -------------------

NUMPY_RUN = matrix_text(
    "repro", repeats=3, steps=6, timeout=300,       # compare's verdict needs 3 repeats a side
    benchmarks=[{"workload": "matmul", "environments": ["numpy"], "options": {"n": [32, 64]}},
                {"workload": "elementwise", "environments": ["numpy"], "size": "tiny"}])


def cells_of(run_dir: Path) -> dict[tuple[str, int], dict]:
    records = (json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json"))
    return {(r["cell_id"], r["repeat"]): r for r in records}


@pytest.mark.slow
def test_reproduce_a_numpy_run_gets_the_same_cells_and_refuses_a_changed_lock(
        tmp_path, capsys):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(NUMPY_RUN, encoding="utf-8")
    results = tmp_path / "results"
    # --only: reproduce must run exactly the cells the original ran, not the whole matrix.
    assert cli.main([str(matrix), "--executor", "local", "--only", "matmul",
                     "--results-dir", str(results)]) == 0
    [original] = (results / "repro").iterdir()
    capsys.readouterr()

    assert cli.main(["reproduce", str(original), "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    [again] = [p for p in (results / "repro").iterdir() if p != original]
    first, second = cells_of(original), cells_of(again)
    assert set(first) == set(second) and len(first) == 6      # 2 matmul cells × 3 repeats
    assert {r["status"] for r in second.values()} == {"ok"}
    for key, record in second.items():
        assert record["metadata"]["lock_sha256"] == first[key]["metadata"]["lock_sha256"]
        assert record["metadata"]["distributions_sha256"] == \
            first[key]["metadata"]["distributions_sha256"]
    manifest = json.loads((again / "manifest.json").read_text())
    assert manifest["reproduces"] == str(original.resolve())
    assert f"reproducing {original}: 2 cells in 1 environments" in out
    written = (again / f"compare-{original.name}.md").read_text()
    assert "| numpy | same stack |" in written
    assert "not comparable" not in written.split("## Cells")[1]

    # A lock that is not the one the run used (the records say another): refused, one line.
    changed = tmp_path / "changed" / "repro" / original.name
    shutil.copytree(original, changed)
    set_metadata(changed, "numpy", lock_sha256="f" * 64)
    manifest = json.loads((changed / "manifest.json").read_text())
    manifest["environments"]["numpy"]["lock_sha256"] = "f" * 64
    (changed / "manifest.json").write_text(json.dumps(manifest))
    before = sorted(p.name for p in (results / "repro").iterdir())
    assert cli.main(["reproduce", str(changed), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: cannot reproduce {changed}: environment numpy: "
                             "images/numpy/requirements.lock has sha256 ")
    assert f"the run used {'f' * 12}…" in err[0]
    assert sorted(p.name for p in (results / "repro").iterdir()) == before
