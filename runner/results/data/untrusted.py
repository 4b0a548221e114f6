"""A run folder's files read as untrusted input (a run folder travels between machines): a
regular file only, never through a symbolic link, never waited on, and refused by its size
before a byte of it is read."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 64 << 20        # a record or manifest larger than this is not one


def read_file(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, never through a symbolic link; OSError otherwise (ELOOP for a
    link, EFBIG for a file over `limit`). O_NONBLOCK: a FIFO in its place cannot hang the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if status.st_size > limit:              # refused unread
            raise OSError(errno.EFBIG, f"larger than {limit >> 20} MB", str(path))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MB", str(path))
    return data


def describe_os_error(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (never followed in a run folder)"
    return exc.strerror or str(exc)
