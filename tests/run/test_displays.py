"""What a run shows while it builds and calibrates: on a terminal a rich progress display (a row
per environment being built with its package count, advanced by the installer's lines; the
calibration's count), in a pipe plain lines; a real run in a pseudo-terminal shows the
calibration's progress and each cell's [k/N] with the finish time, and the same run into a
pipe plain lines only."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from runner.paths import REPO_ROOT
from runner.run.displays import build_display, calibration_display
from tests.matrices import matrix_text, this_interpreter

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PYTHON = sys.executable


def terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=100, color_system="standard")


def test_a_build_on_a_terminal_is_a_progress_row_with_its_package_count():
    console = terminal()
    with build_display(console) as display:
        say = display.start("images/torch", 3, ready=False)
        for line in ("Resolved 3 packages", " + numpy==2.2.0", " + torch==2.13.0"):
            say(line)
        row = display.progress.tasks[0]
        assert (row.total, row.completed) == (3, 2)      # two installed lines of three
        display.finish("images/torch")
        assert not display.progress.tasks
    shown = ANSI.sub("", console.file.getvalue())
    assert "environment images/torch" in shown


def test_a_build_in_a_pipe_is_one_plain_line_and_a_ready_one_none():
    console = Console(file=io.StringIO(), width=100)
    with build_display(console) as display:
        display.start("images/torch", 87, ready=False)(" + numpy==2.2.0")
        display.start("images/numpy", 7, ready=True)("checking")
    assert console.file.getvalue() == "environment images/torch: building (87 packages)\n"


def test_the_calibration_on_a_terminal_counts_its_runs():
    console = terminal()
    with calibration_display(console, 4) as show:
        show(3, "keras-jax bfloat16")
    assert "calibration: keras-jax bfloat16" in ANSI.sub("", console.file.getvalue())
    plain = Console(file=io.StringIO(), width=100)
    with calibration_display(plain, 4) as show:
        show(1, "numpy float32")
    assert plain.file.getvalue() == ""              # its line when it ends says how it went


MATRIX = matrix_text("shown", steps=2, profile="smoke", calibrate=True,
                     tables={"profiles": {"smoke": {"size": "tiny"}}},
                     environments={"numpy": this_interpreter()},
                     benchmarks=[{"workload": "selftest", "environments": ["numpy"],
                                  "batch_size": [1, 2]}])


def command(tmp_path: Path) -> list[str]:
    matrix = tmp_path / "shown.toml"
    matrix.write_text(MATRIX, encoding="utf-8")
    return [PYTHON, "-m", "runner", str(matrix), "--results-dir", str(tmp_path / "results")]


def environ() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}


def in_a_terminal(argv: list[str], timeout: float = 240.0) -> tuple[int, str]:
    """Run `argv` with a pseudo-terminal as its stdout and stderr: (exit code, what it wrote)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(argv, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL,
                               cwd=REPO_ROOT, env=environ(), close_fds=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 65536)
        except OSError:               # the follower closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def test_a_run_in_a_terminal_shows_progress_and_in_a_pipe_plain_lines(tmp_path):
    code, shown = in_a_terminal(command(tmp_path))
    assert code == 0, shown
    assert ANSI.search(shown)                                   # a live display drew
    text = ANSI.sub("", shown)
    assert "calibration: numpy" in text                         # the calibration's row
    assert re.search(r"selftest-run-numpy-b1\S* r1: .* · \[1/2\] finish ~\d\d:\d\d", text), text
    piped = subprocess.run(command(tmp_path), capture_output=True, text=True, cwd=REPO_ROOT,
                           env=environ(), timeout=240)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert not ANSI.search(piped.stdout)
    lines = piped.stdout.splitlines()
    assert any(re.search(r"· \[2/2\]$", line) for line in lines), piped.stdout
    assert any(line.startswith("estimate: ") for line in lines)
    assert not any("calibration: numpy" in line for line in lines)   # no progress rows
