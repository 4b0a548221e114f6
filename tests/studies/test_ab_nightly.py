"""A real A/B (slow): the shipped Keras against keras-nightly's newest build on a matrix product
(keras.ops.matmul at its tiny size, batch 8) on JAX — the one environment built from the package
index's nightly, the two sides' processes in pairs — kept as short as an interval allows (3
repeats a side, 5 steps). The workload is the cheapest Keras runs: what is checked is the
nightly's build, its stack and the table, not a model (the CNN's six processes took 113 s of
this module's 119 s in a CI's slow stage, 2026-11-29). One run folder serves every assertion."""

from __future__ import annotations

import json

import pytest

from runner import cli
from tests.matrices import environment, matrix_text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nightly_ab(tmp_path_factory, pypi_module):
    folder = tmp_path_factory.mktemp("ab-nightly")
    path = folder / "ab.toml"
    path.write_text(matrix_text("ab-nightly", repeats=3, steps=5, executor="local", environments={
        "keras": environment("keras-jax"),
        "keras-nightly": environment("keras-jax", channel="nightly")},
        benchmarks=[{"workload": "matmul", "batch_size": 8, "size": "tiny",
                     "environments": ["*"]}]))
    code = cli.main(["ab", str(path), "--results-dir", str(folder / "results")])
    [run] = (folder / "results" / "ab-nightly").iterdir()
    return code, run


@pytest.fixture(scope="module")
def pypi_module():
    from runner.environments import indexes

    if indexes.unreachable("https://pypi.org/simple/"):
        pytest.skip("PyPI cannot be reached from here (the nightly's builds are listed there)")


def test_the_nightly_side_runs_its_build_and_says_which(nightly_ab):
    code, run = nightly_ab
    assert code in (0, 1)                                   # every cell ran (1: B slower)
    manifest = json.loads((run / "manifest.json").read_text())
    [build] = manifest["environments"]["keras-nightly"]["stack"]["builds"]
    assert build["build"] == "keras-nightly" and build["version"].startswith("3.16.0.dev")
    records = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    nightly = [r for r in records if r["environment"] == "keras-nightly"]
    shipped = [r for r in records if r["environment"] == "keras"]
    assert len(nightly) == len(shipped) == 3
    assert all(r["status"] == "ok" for r in records)
    assert all(r["metadata"]["stack_builds"] == [build] for r in nightly)
    assert all(r["metadata"]["keras_version"] == build["version"] for r in nightly)
    assert all(r["metadata"]["keras_version"] == "3.15.1" for r in shipped)
    assert "keras" not in nightly[0]["distributions"]       # the release left out
    assert (run / "stacks" / "keras-nightly" / "builds.json").is_file()


def test_the_table_has_the_ratio_its_interval_and_what_it_could_see(nightly_ab):
    _, run = nightly_ab
    text = (run / "ab.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith("| matmul (run)")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "8" and "× (" in cells[4] and "–" in cells[4] and cells[5].endswith("%")
    assert cells[6].strip("*") in ("same", "slower", "faster")
    assert "- Stack of keras-nightly against keras: " in text and "+ keras-nightly 3.16.0.dev" in text
