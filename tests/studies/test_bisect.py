"""A real bisect on this machine: two NumPy-environment runs whose stacks differ in five
distributions (two upgraded or downgraded, one added, one removed, and one — a BLAS kernel
change — that slows the matmul cell about 3×); `runner bisect` names that one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from runner import cli
from runner.environments.venvs import find_uv
from runner.history import db, tables
from tests.fixtures import FIXTURE_RUNS
from tests.matrices import matrix_text

from .probe_wheels import write_wheel

GOOD = ["numpy==2.4.6", "psutil==7.2.2", "nvidia-ml-py==13.615.71", "dlbench-blas-probe==1.0",
        "tomli==2.2.1"]
BAD = ["numpy==2.4.6", "psutil==7.0.0", "nvidia-ml-py==12.575.51", "dlbench-blas-probe==2.0",
       "six==1.17.0"]


def make_env(path: Path, requirements: list[str], wheels: Path) -> Path:
    uv = find_uv()
    subprocess.run([uv, "venv", "--quiet", "--seed", "--python", "3.11", str(path)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(path / "bin" / "python"),
                    "--find-links", str(wheels), *requirements], check=True)
    return path / "bin" / "python"


def matrix(folder: Path, name: str, python: Path) -> Path:
    path = folder / f"{name}.toml"
    # One BLAS thread: on a shared 2-core machine a second OpenBLAS thread only adds noise.
    path.write_text(matrix_text(
        name, repeats=3, min_time=0.3, max_time=3.0, executor="local",
        environments={"numpy": {"python": str(python), "api": "numpy",
                                "env": {"OPENBLAS_NUM_THREADS": "1"}}},
        benchmarks=[{"workload": "matmul", "batch_size": 1, "environments": ["numpy"],
                     "options": {"n": 384}}]))
    return path


@pytest.mark.slow
def test_bisect_names_the_distribution_that_slowed_the_cell(tmp_path, capsys, monkeypatch):
    if find_uv() is None:
        pytest.skip("uv is missing")
    monkeypatch.setenv("COLUMNS", "240")
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "1.0", slow=False)
    write_wheel(wheels, "2.0", slow=True)
    results = tmp_path / "results"
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", url)
    runs = {}
    for name, requirements in (("good", GOOD), ("bad", BAD)):
        python = make_env(tmp_path / f"env-{name}", requirements, wheels)
        assert cli.main([str(matrix(tmp_path, name, python)), "--results-dir", str(results)]) == 0
        runs[name] = next((results / name).iterdir())
    capsys.readouterr()
    cell = next((runs["bad"] / "cells").glob("*-r1.json")).name.split("-r1")[0]

    code = cli.main(["bisect", str(runs["good"]), str(runs["bad"]), "--cell", cell,
                     "--find-links", str(wheels), "--work-dir", str(tmp_path / "bisect")])
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    assert "5 distributions changed" in out
    assert "named the distribution: dlbench-blas-probe 1.0 → 2.0" in out

    engine = db.open_history(url)
    with engine.connect() as conn:
        bisect = conn.execute(select(tables.bisects)).one()
        steps = conn.execute(select(tables.bisect_steps).order_by(tables.bisect_steps.c.step)).all()
    engine.dispose()
    assert bisect.status == "named" and bisect.culprit == ["dlbench-blas-probe"]
    assert set(bisect.changed) == {"dlbench-blas-probe", "nvidia-ml-py", "psutil", "six", "tomli"}
    assert steps[0].taken == [] and len(steps[1].taken) == 5      # the two end points
    assert all(s.resolved and len(s.lock_sha256) == 64 for s in steps)
    assert all(len(s.repeat_medians_ms) == 3 for s in steps)
    final = [s for s in steps[2:] if s.taken == ["dlbench-blas-probe"]
             or "dlbench-blas-probe" in s.taken]
    assert final and all(s.verdict == "bad" and s.ratio_to_good > 1.5 for s in final)
    assert all(s.verdict == "good" for s in steps[2:] if "dlbench-blas-probe" not in s.taken)


def test_bisect_refuses_runs_with_the_same_distributions(capsys):
    fixtures = FIXTURE_RUNS
    code = cli.main(["bisect", str(fixtures / "base"), str(fixtures / "same"), "--cell",
                     "f2cnnkrjax", "--db", "sqlite://"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "do not list the installed distributions" in err

