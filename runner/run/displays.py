"""What a run shows while it builds environments and calibrates: a rich progress display on a
terminal (a row per environment being built, with its package count, what its installer says
and the time; the calibration's count and time), transient, so that the lines that stay are
the ones before and after; plain lines where the output is not a terminal (a log file or a
pipe), so a log stays readable: one when a build starts (the calibration's is the line that
says how it went)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID,
                           TextColumn, TimeElapsedColumn)

from ..errors import user_text

# An installer's line for one distribution: uv's " + name==1.2", pip's "Collecting name==1.2"
INSTALLED = re.compile(r"^\s*(\+ |Collecting |Downloading |Using cached )\S")


def _progress(console: Console) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True)


class BuildDisplay:
    """Environments as they are prepared: start() a row (or a plain line), the returned
    function takes the installer's lines, finish() removes the row."""

    def __init__(self, console: Console, progress: Progress | None):
        self.console, self.progress = console, progress
        self.rows: dict[str, TaskID] = {}

    def start(self, key: str, packages: int | None, ready: bool | None,
              expected: str = "") -> Callable[[str], None]:
        label = user_text(key)
        building = ready is False
        what = f"building ({packages} packages)" if building and packages else \
            ("building" if building else "preparing")
        if self.progress is None:
            if building:
                self.console.print(f"environment {label}: {what}"
                                   f"{f', {expected} expected' if expected else ''}",
                                   soft_wrap=True, highlight=False)
            return lambda line: None
        row = self.progress.add_task(f"environment {label}: {what}",
                                     total=packages if building and packages else None)
        self.rows[key] = row

        def say(line: str) -> None:
            assert self.progress is not None
            if INSTALLED.match(line):
                self.progress.advance(row)
            self.progress.update(row, description=f"environment {label}: "
                                                  f"{user_text(line.strip()[:70])}")

        return say

    def finish(self, key: str) -> None:
        if self.progress is not None and key in self.rows:
            self.progress.remove_task(self.rows.pop(key))


@contextlib.contextmanager
def build_display(console: Console) -> Iterator[BuildDisplay]:
    if not console.is_terminal:
        yield BuildDisplay(console, None)
        return
    with _progress(console) as progress:
        yield BuildDisplay(console, progress)


@contextlib.contextmanager
def calibration_display(console: Console, total: int) -> Iterator[Callable[[int, str], None]]:
    """show(n, what): the calibration run n of `total` is `what` (environment, precision)."""
    if total == 0:
        yield lambda n, text: None
        return
    if not console.is_terminal:      # the line when it ends is the log's (the estimate's
        yield lambda n, text: None   # line said how long it would take)
        return
    with _progress(console) as progress:
        task = progress.add_task("calibration", total=total)

        def show(n: int, text: str) -> None:
            progress.update(task, completed=n - 1, description=f"calibration: {text}")

        yield show
