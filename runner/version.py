"""The runner's version, as far as its numbers go: a digest of the worker code (the clock, the
timing method, every workload and framework adapter, the telemetry) and of the host's part of the
timing method. Computed on the host from the files the workers run (the worker folder is mounted
into containers and shipped to Ray nodes as is), recorded in the manifest and in every record's
metadata (`runner_version`, a comparability key), and part of every cell id: a change to the
harness between two runs reads as "not comparable", never as the framework getting faster or
slower (asv marks benchmarks whose code changed the same way)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent / "worker"

# The host's part of how a number is taken (the worker's part is its code). Change this text
# whenever the host changes it, so that the version changes with it.
TIMING_METHOD = ("repeats in fresh processes; blocks of calls with one device synchronisation "
                 "per block; one block size per cell, calibrated by its first repeat and handed "
                 "to the others")


@functools.cache
def runner_version() -> str:
    """12 hex digits of sha256 over TIMING_METHOD and every worker .py file (path and bytes)."""
    digest = hashlib.sha256(TIMING_METHOD.encode())
    for path in sorted(WORKER_DIR.rglob("*.py")):
        digest.update(b"\0" + path.relative_to(WORKER_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
