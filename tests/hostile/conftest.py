"""The hostile suites' shared fixtures: no host history URL in any test, and one real finished
run for the whole session (test modules read it, and tamper only with copies of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import cli
from tests.hostile.helpers import copy_run
from tests.hostile.test_hostile_runs import MATRIX


@pytest.fixture(autouse=True)
def no_host_history_url(monkeypatch):
    """Runs record their history beside their run folders (a host's DL_BENCH_HISTORY_URL
    would take them elsewhere)."""
    monkeypatch.delenv("DL_BENCH_HISTORY_URL", raising=False)


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    """A real run: 2 selftest cells × 2 repeats, all ok (its history in its results folder).
    Read, never changed: a test that changes a run changes a copy (run_copy, copy_run)."""
    folder = tmp_path_factory.mktemp("finished")
    (folder / "matrix.toml").write_text(MATRIX)
    assert cli.main([str(folder / "matrix.toml"), "--results-dir", str(folder / "results")]) == 0
    (run,) = (folder / "results" / "hostile").iterdir()
    return run


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    """A copy of the finished run to tamper with (results/hostile/<stamp>), and its matrix."""
    return copy_run(finished_run, tmp_path)
