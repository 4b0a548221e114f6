"""Signals and stops: a SIGTERM while a budget stop writes its reports ends the run as terminated
(128 + the signal, the manifest saying interrupted), and a run left out of the history — stopped
by its budget, interrupted after its last cell, or while its history was being recorded, after
its `report:` line — says `history: not recorded (…)` and gives the command that records it.
After Ctrl-C or SIGTERM the `continue with:` line resumes with the run's own options; a second
Ctrl-C never skips the reports; an interrupted `report` keeps the plots it had. The cells run
in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from runner.history import record
from runner.paths import REPO_ROOT
from runner.results.render import plots
from runner.run import pipeline
from tests.hostile.helpers import HOST_PYTHON, history_runs
from tests.hostile.test_hostile_runs import MATRIX, hostile_matrix, main, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401

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


# --- the resume line, a second Ctrl-C, a signal after the last cell --------------------------

SMOKE = hostile_matrix([300.0, 301.0, 302.0], repeats=1,
                       tables={"profiles": {"smoke": {"steps": 2}}})


@pytest.mark.slow          # a real runner stopped by SIGTERM, then resumed as printed: ~15 s
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_line_after_an_interruption_resumes_with_the_same_options(sig, tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text(SMOKE)
    argv = [HOST_PYTHON, "-m", "runner", str(matrix), "--results-dir", str(tmp_path / "r"),
            "--profile", "smoke", "--only", "sleep_ms=30"]
    # A shell's background job (CI's, a nohup'd suite) ignores SIGINT and its children inherit
    # that; the runner, like Python, keeps a signal it was started ignoring: give it Ctrl-C.
    runner = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert runner.stdout is not None
    for line in runner.stdout:
        if line.startswith("✓ selftest"):           # one cell is finished, the next runs
            runner.send_signal(sig)
            break
    output = line + runner.communicate(timeout=120)[0]
    assert runner.returncode == 128 + sig, output
    (said,) = [line for line in output.splitlines() if "continue with: " in line]
    command = shlex.split(said.split("continue with: ", 1)[1])
    assert command[0] in (os.path.relpath(HOST_PYTHON, REPO_ROOT), HOST_PYTHON)
    assert command[command.index("--profile") + 1] == "smoke"
    assert command[command.index("--only") + 1] == "sleep_ms=30"
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert len(records(run)) == 3 and all(r["status"] == "ok" for r in records(run).values())


def run_with_ctrl_c_as_its_cells_end(tmp_path, capsys, monkeypatch) -> tuple[int, str, str]:
    """MATRIX run in tmp_path/r with Ctrl-C as its last cell ends (every cell finished); Ctrl-C
    as an interactive Python has it, also when the suite runs as a background job (which
    ignores SIGINT: then os.kill below would do nothing)."""
    real_cells = pipeline.run_cells

    def cells_then_ctrl_c(*args, **kwargs):
        real_cells(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)                               # interrupted here, every cell finished

    monkeypatch.setattr(pipeline, "run_cells", cells_then_ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    (tmp_path / "m.toml").write_text(MATRIX)
    try:
        return main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_second_ctrl_c_never_skips_the_reports(tmp_path, capsys, monkeypatch):
    """The first Ctrl-C as the cells end, a second while the reports are written: every
    finished record is in the reports, and the run ends 130."""
    real_reports = pipeline.write_reports

    def ctrl_c_again(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real_reports(*args, **kwargs)

    monkeypatch.setattr(pipeline, "write_reports", ctrl_c_again)
    code, out, err = run_with_ctrl_c_as_its_cells_end(tmp_path, capsys, monkeypatch)
    assert code == 130, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert len(records(run)) == 4
    report = (run / "report.md").read_text()
    assert "sleep_ms=1.0" in report and "sleep_ms=2.0" in report
    assert json.loads((run / "manifest.json").read_text())["interrupted"] is True


def test_a_signal_after_the_last_cell_says_the_history_is_not_recorded_and_how_to(
        tmp_path, capsys, monkeypatch):
    code, out, err = run_with_ctrl_c_as_its_cells_end(tmp_path, capsys, monkeypatch)
    assert code == 130, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    database = tmp_path / "r" / "history.sqlite"
    said = " ".join(out.split())
    command = f" -m runner history import {run} --db sqlite:///{database}"
    assert "! history: not recorded (the run was interrupted); its --resume records it, or " \
           "record the run as it is: " in said and command in said
    assert not database.exists()
    assert main(capsys, *command.split()[2:])[0] == 0           # the command it gave
    assert history_runs(database) == [f"hostile/{run.name}"]


def test_an_interrupted_report_keeps_the_plots_it_had(run_copy, capsys, monkeypatch):
    before = {p.name: p.read_bytes() for p in (run_copy / "plots").glob("*.png")}
    assert {"time.png", "memory.png"} <= set(before)

    def ctrl_c(summaries, target):                  # Ctrl-C while the memory plot is drawn
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "PLOTS", [(name, title, ctrl_c if name == "memory.png" else draw)
                                         for name, title, draw in plots.PLOTS])
    code, out, err = main(capsys, "report", run_copy)
    assert code == 130, err
    assert {p.name: p.read_bytes() for p in (run_copy / "plots").glob("*.png")} == before
    assert not list(run_copy.glob(".plots-*"))        # the half-drawn folder is gone
