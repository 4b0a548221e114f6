"""The runner's two ways of writing a moment, both in UTC: a run folder's name
(20261127T173011Z, sorting as time does) and a timestamp in a file (2026-11-27T17:30:11Z, ISO
8601). Every module that writes one takes it from here."""

from __future__ import annotations

import time

FOLDER_FORMAT = "%Y%m%dT%H%M%SZ"
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def folder_stamp(at: float | None = None) -> str:
    return time.strftime(FOLDER_FORMAT, time.gmtime(at))


def iso_now(at: float | None = None) -> str:
    return time.strftime(ISO_FORMAT, time.gmtime(at))
