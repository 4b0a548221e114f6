"""A derived stack with the Docker executor, against the real engine: its image is built from the
derived lock FROM the local base, tagged by that lock's hash (never the folder's alias), a cell
runs in it, and `export RUN_DIR` carries exactly that image."""

from __future__ import annotations

import json

import pytest

from runner import cli
from runner.environments import venvs
from tests.matrices import environment, matrix_text


pytestmark = [pytest.mark.slow, pytest.mark.docker]


def test_a_derived_stack_runs_in_an_image_tagged_by_its_lock(engine, base_env, write_matrix,
                                                              run_cli, results_dir, tmp_path,
                                                              monkeypatch, capsys, pypi):
    monkeypatch.setenv("COLUMNS", "250")
    path = write_matrix(matrix_text(
        "derived-docker", steps=2, timeout=300,
        environments={"numpy-2-2": environment("numpy", pins=["numpy==2.2.6"])},
        benchmarks=[{"workload": "matmul", "environments": ["numpy-2-2"], "size": "tiny"}]),
        with_environments=False)
    code, out, err = run_cli(path, "--executor", "docker")
    assert code == 0, out + err
    [run] = (results_dir / "derived-docker").iterdir()
    sha = venvs.sha256_file(run / "stacks" / "numpy-2-2" / "requirements.lock")
    [record] = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    assert record["status"] == "ok" and record["distributions"]["numpy"] == "2.2.6"
    assert record["metadata"]["lock_sha256"] == sha
    image = engine.images.get(record["metadata"]["image_id"])
    tag = f"dl-bench/numpy:cpu-{sha[:12]}"
    try:
        assert tag in image.tags and "dl-bench/numpy:cpu" not in image.tags
        assert image.labels["org.dl-bench.lock-sha256"] == sha
        assert f"derived: images/numpy + numpy==2.2.6 → lock sha {sha[:12]} (image {tag})" in out
        archive = tmp_path / "derived.tar"
        code = cli.main(["export", str(run), "-o", str(archive)])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        assert f"numpy-2-2: {image.id[:19]}" in out and tag in out
    finally:
        engine.images.remove(tag, force=True)
