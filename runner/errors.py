"""Errors the CLI turns into one line on stderr and an exit code (no traceback)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Invalid matrix, arguments or paths: exit code 2, nothing written."""

    exit_code = EXIT_USAGE


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
