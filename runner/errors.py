"""The one error path: errors the CLI turns into one line on stderr and an exit code, never a
traceback.

Exit codes: 0 all cells ok; 1 some cells failed; 2 invalid input or usage, or a run that cannot
go on (a path that cannot be written, a full disk); 130 interrupted (Ctrl-C); 143 terminated
(SIGTERM); 70 an internal error (a bug: one line, the traceback in a log file).
"""

from __future__ import annotations

import difflib
import os
import tempfile
import time
import traceback
from collections.abc import Iterable

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 143        # 128 + SIGTERM: systemd, Slurm and `timeout` stop a run this way
EXIT_INTERNAL = 70           # sysexits' EX_SOFTWARE: a bug of the runner, not of the input


class UsageError(Exception):
    """Invalid matrix, arguments, paths or run folders, or a run that cannot go on (a full
    disk): exit code 2, one line naming the file, key or path and the problem."""

    exit_code = EXIT_USAGE


def did_you_mean(word: str, choices: Iterable[str]) -> str:
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
