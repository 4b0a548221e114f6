"""`runner scan` (runner/studies/scan.py): its days, what it refuses, and (slow: the package
index's real builds) which days it measures, each build named in its plan. The change points
between days are tests/history/test_days.py's (a synthetic history of days)."""

from __future__ import annotations

import pytest

from runner.errors import UsageError
from runner.studies.scan import scan_days
from tests.matrices import environment, matrix_text


def test_the_days_of_a_scan():
    assert scan_days("2026-10-01", "2026-10-07", 3) == ["2026-10-01", "2026-10-04", "2026-10-07"]
    assert scan_days("2026-10-30", "2026-11-01", 1) == ["2026-10-30", "2026-10-31", "2026-11-01"]
    for first, last, every, said in (("2026-10-07", "2026-10-01", 1, "must not be after"),
                                     ("2026-10-01", "2026-10-07", 0, "--every is at least 1"),
                                     ("2026-10-32", "2026-11-07", 1, "a build's day is"),
                                     ("2020-01-01", "2026-01-01", 1, "at most 366")):
        with pytest.raises(UsageError, match=said):
            scan_days(first, last, every)


def scan_matrix(**keys) -> str:
    return matrix_text("scan", environments={"keras-nightly": environment("keras-jax", **keys)},
                       benchmarks=[{"workload": "cnn", "task": "fit", "batch_size": 32,
                                    "size": "tiny", "environments": ["*"]}])


def test_a_matrix_without_a_follower_is_one_line(write_matrix, run_cli, results_dir):
    path = write_matrix(scan_matrix(), with_environments=False)
    code, _, err = run_cli("scan", path, "--channel", "nightly", "--from", "2026-10-23",
                           "--to", "2026-10-25")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no environment follows the nightly channel (give one channel = 'nightly')" in err
    assert not any(results_dir.iterdir())


@pytest.mark.slow
def test_days_without_a_build_are_skipped_and_the_first_day_planned(pypi, write_matrix, run_cli,
                                                                     results_dir, monkeypatch):
    from runner.environments import channels

    monkeypatch.setenv("COLUMNS", "250")
    built = sorted({d for v in channels.listed("keras-nightly") if (d := channels.build_day(v))})
    first, last = built[-2], built[-1]
    path = write_matrix(scan_matrix(channel="nightly"), with_environments=False)
    code, out, err = run_cli("scan", path, "--channel", "nightly", "--from", "2099-01-01",
                             "--to", "2099-01-03", "--dry-run")
    assert code == 2 and "scan: no day from 2099-01-01 to 2099-01-03 has a build" in err
    assert "2099-01-02: no keras-nightly build that day; skipped" in out
    code, out, err = run_cli("scan", path, "--channel", "nightly", "--from", first,
                             "--to", last, "--dry-run")
    assert code == 0, err
    assert f"scan: 2 days of keras-nightly ({first}, {last}) in keras-nightly" in out
    version, _ = channels.choose("keras-nightly", channels.listed("keras-nightly"), first)
    assert f"derived: images/jax + keras-nightly=={version} (nightly {first})" in out
    assert not any(results_dir.iterdir())
