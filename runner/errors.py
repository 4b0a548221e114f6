"""Errors the CLI turns into one line on stderr and an exit code (no traceback)."""

from __future__ import annotations

import contextlib
import difflib
import signal
import threading
from collections.abc import Iterable, Iterator

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)   # systemd, Slurm, timeout, a closed terminal


class UsageError(Exception):
    """Invalid matrix, arguments or paths: exit code 2, nothing written."""

    exit_code = EXIT_USAGE


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled exactly as Ctrl-C (every `except KeyboardInterrupt` cleans up:
    workers and containers killed, finished records kept, the manifest finalised)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def interrupted_exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports it: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    return 128 + exc.signum if isinstance(exc, Terminated) else EXIT_INTERRUPTED


@contextlib.contextmanager
def terminating_signals_interrupt() -> Iterator[None]:
    """While the CLI runs, SIGTERM and SIGHUP raise Terminated in the main thread; a signal
    the runner was started ignoring (nohup) stays ignored. The cleanup that follows is not
    interrupted by a second one; the earlier handlers come back afterwards."""
    def raise_terminated(signum: int, frame) -> None:
        for sig in TERMINATING_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    if threading.current_thread() is not threading.main_thread():
        yield                       # only the main thread may set handlers (and get signals)
        return
    earlier = {sig: signal.getsignal(sig) for sig in TERMINATING_SIGNALS}
    for sig, handler in earlier.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, raise_terminated)
    try:
        yield
    finally:
        for sig, handler in earlier.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
