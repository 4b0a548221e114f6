"""Signals and stops: a SIGTERM while a budget stop writes its reports ends the run as terminated
(128 + the signal, the manifest saying interrupted), and a run left out of the history — stopped
by its budget, or interrupted while its history was being recorded, after its `report:` line —
says `history: not recorded (…)` and gives the command that records it. The cells run in this
interpreter (NumPy's selftest)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from runner.history import record
from runner.run import pipeline
from tests.hostile.test_hostile_round4 import no_host_history_url  # noqa: F401
from tests.hostile.test_hostile_runs import hostile_matrix, main, no_process_left_behind  # noqa: F401

# $1 a second of the VM and a budget of $5: the run stops a few of its 12 cells in.
BUDGET = hostile_matrix(1.0, repeats=1, steps=2, benchmarks=[
    {"workload": "selftest", "environments": ["host"], "batch_size": list(range(1, 12))}],
    tables={"cost": {"price_per_hour": 3600.0, "budget": 5.0}})


def said(out: str) -> str:
    return " ".join(out.split())


def not_recorded(out: str, why: str, run: Path, results: Path) -> bool:
    command = f" -m runner history import {run} --db sqlite:///{results / 'history.sqlite'}"
    return f"! history: not recorded ({why}); its --resume records it, or record the run as " \
           f"it is: " in said(out) and command in said(out)


def test_a_run_stopped_by_its_budget_says_its_history_is_not_recorded(tmp_path, capsys):
    (tmp_path / "m.toml").write_text(BUDGET)
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert code == 1 and "stopped: budget $5.00" in out, out + err
    assert not_recorded(out, "the run stopped at its budget", run, tmp_path / "r"), out
    assert not (tmp_path / "r" / "history.sqlite").exists()


def test_a_sigterm_while_a_budget_stop_writes_its_reports_ends_the_run_terminated(
        tmp_path, capsys, monkeypatch):
    real = pipeline.write_reports

    def terminated_meanwhile(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)          # held: the reports are written whole
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "write_reports", terminated_meanwhile)
    (tmp_path / "m.toml").write_text(BUDGET)
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert code == 128 + signal.SIGTERM, out + err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["interrupted"] is True and manifest["stopped_by"] == "budget"
    assert (run / "report.md").is_file()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_interrupted_while_its_history_is_recorded_says_so(signum, tmp_path, capsys,
                                                                 monkeypatch):
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signum)
        time.sleep(10)                              # interrupted here, after `report:`

    monkeypatch.setattr(record, "record_finished_run", interrupted)
    (tmp_path / "m.toml").write_text(hostile_matrix(1.0, repeats=1))
    try:
        code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    finally:
        signal.signal(signal.SIGINT, previous)
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert code == 128 + signum, out + err
    assert "report: " in out and out.index("report: ") < out.index("history: not recorded")
    assert not_recorded(out, "the run was interrupted while it was recorded", run,
                        tmp_path / "r"), out
