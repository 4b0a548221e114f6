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


def test_a_bad_retry_setting_is_one_line_before_ray_is_touched(write_matrix, run_cli,
                                                               monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)          # not even imported
    monkeypatch.setenv("DL_BENCH_RAY_RETRIES", "x")
    matrix = write_matrix("""
    [[benchmarks]]
    workload = "matmul"
    environments = ["numpy"]
    """)
    code, _, err = run_cli("plan", matrix, "--executor", "ray")
    assert code == 2
    assert err.strip() == ("error: DL_BENCH_RAY_RETRIES='x': expected a whole number from 0 to "
                           "100 (resubmissions of a lost task)")


def test_a_ray_without_token_authentication_is_refused():
    import pytest

    from runner.executors.ray_cluster import RayUnavailable, check_version

    check_version("2.52.0")
    check_version("2.60.0")
    with pytest.raises(RayUnavailable, match="Ray 2.51.1 is older than 2.52"):
        check_version("2.51.1")


def test_ray_init_cannot_take_the_runners_sigterm_handler():
    """ray.init sets SIGTERM to sys.exit; the runner's handler (SIGTERM as Ctrl-C) stays."""
    import signal

    from runner.executors.ray_cluster import our_sigterm_handler

    def ours(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, ours)
    try:
        with our_sigterm_handler():
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as Ray does
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, previous)
