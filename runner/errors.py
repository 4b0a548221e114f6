"""The one error path: errors the CLI turns into one line on stderr and an exit code, never a
traceback.

Exit codes: 0 all cells ok; 1 some cells failed; 2 invalid input or usage, or a run that cannot
go on (a path that cannot be written, a full disk); 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM), 129 hung up (SIGHUP); 70 an internal error (a bug: one line, the traceback in a log
file).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_INTERNAL = 70           # sysexits' EX_SOFTWARE: a bug of the runner, not of the input
TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)   # systemd, Slurm, timeout, a closed terminal


class UsageError(Exception):
    """Invalid matrix, arguments, paths or run folders, or a run that cannot go on (a full
    disk): exit code 2, one line naming the file, key or path and the problem."""

    exit_code = EXIT_USAGE


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def one_line(text: object) -> str:
    """`text` on one line, with no control characters: a name read from a crafted file cannot
    break the line, or send escape sequences to the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def os_error_line(exc: OSError) -> str:
    """An OSError as "<path>: <problem>" (a full disk, a folder that cannot be written)."""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        return f"{os.fsdecode(exc.filename)}: {what}"
    return what


def write_traceback(exc: BaseException) -> str | None:
    """The traceback of an internal error, in a file of its own (created exclusively, never
    through a link); its path, or None when no file can be written."""
    try:
        fd, path = tempfile.mkstemp(prefix=f"dl-bench-runner-error-{time.strftime('%Y%m%dT%H%M%S')}-",
                                    suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return None


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


def interruption(signum: int) -> KeyboardInterrupt:
    """What a signal held meanwhile means: Ctrl-C, or Terminated (SIGTERM, SIGHUP)."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


@contextlib.contextmanager
def signals_held(notify: Callable[[int], None]) -> Iterator[list[int]]:
    """Ctrl-C, SIGTERM and SIGHUP held while what is finished is saved (the manifest and the
    reports): each one that arrives is noted in the list this yields (and `notify` says so),
    never raised in the middle of a write; the caller says what they mean afterwards. A signal
    ignored before (nohup, or a first SIGTERM being handled) stays ignored."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame) -> None:
        held.append(signum)
        notify(signum)

    earlier = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *TERMINATING_SIGNALS)}
    for sig, handler in earlier.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, hold)
    try:
        yield held
    finally:
        for sig, handler in earlier.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


# What the terminal shows of one string a user or a file controls: a 200 kB option value
# printed whole took minutes (the console's highlighter and the terminal's wrapping of one giant
# word); the record, the reports' files and the history keep every character.
SHOWN_CHARACTERS = 500


def shortened(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """At most `limit` characters of `text`, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not shown)"


def user_text(text: object, keep_lines: bool = False) -> str:
    """A string the user or a file controls (a name, a path, a value of the matrix, a worker's
    error), ready for the rich console: on one line (`keep_lines`: line by line), its control
    characters escaped (an escape sequence cannot rewrite the terminal), its markup escaped
    (`[/b]` is text) and its length bounded (`shortened`)."""
    from rich.markup import escape

    if keep_lines:
        return "\n".join(escape(shortened(one_line(line))) for line in str(text).split("\n"))
    return escape(shortened(one_line(text)))
