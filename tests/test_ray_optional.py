"""Ray is an optional extra: without it the runner works, and asking for the ray executor says
how to get it in one line."""

from __future__ import annotations

import sys


def test_the_ray_executor_without_ray_is_one_line(write_matrix, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)          # as if Ray were not installed
    matrix = write_matrix("""
    [[benchmarks]]
    workload = "matmul"
    environments = ["numpy"]
    """)
    code, _, err = run_cli("plan", matrix, "--executor", "ray")
    assert code == 2
    assert err.strip() == ("error: executor 'ray' needs Ray on this machine: pip install -e "
                           "'.[ray]' (see the README's cluster section)")
    code, out, _ = run_cli("plan", matrix, "--executor", "local")
    assert code == 0 and "executor: local" in out
