"""Every example matrix plans as it stands (a dry run: nothing built, nothing run), so an example
that the schema or a workload change broke fails in seconds. What they run is covered by the
tests of those features, each on a tiny run of its own (tests/schema/test_user_workloads.py runs
the user-workload example once per cell, tests/environments/test_versions_example.py the
versions example)."""

from __future__ import annotations

import pytest

from runner.paths import REPO_ROOT

EXAMPLES = sorted([*REPO_ROOT.joinpath("examples").glob("*.toml"),
                   *REPO_ROOT.joinpath("examples").glob("*/*.toml")])


def test_the_examples_are_found():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
@pytest.mark.parametrize("profile", ["smoke", "full"])
def test_every_example_plans_as_it_stands(example, profile, run_cli):
    code, out, err = run_cli(example, "--profile", profile, "--dry-run")
    assert code == 0 and err == "", err
    assert f"Plan: {example}" in out
    planned = [line for line in out.splitlines() if line.rstrip().endswith("to run")]
    assert planned, out
