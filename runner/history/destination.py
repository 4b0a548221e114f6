"""Where a run's history goes, decided without opening the database: `plan` and a run's first
lines say it, and the run writes there.

First found: `--db URL` on the command line, then the host's DL_BENCH_HISTORY_URL (a matrix
travels between hosts and teams: it must not decide which database this host writes), then the
matrix's `[history] url`, else `history.sqlite` beside the run folders (a resumed run's own
results folder, wherever it lies)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import settings



def default_url(results_dir: Path) -> str:
    return f"sqlite:///{results_dir / 'history.sqlite'}"


def resolve(given: str | None, matrix_url: str | None, results_dir: Path,
            environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(url, why it is that one)."""
    if given:
        return given, "--db"
    host = settings.get(settings.HISTORY_URL, environ)
    if host:
        beats = "; it beats the matrix's [history] url" if matrix_url else ""
        return host, f"{settings.HISTORY_URL}{beats}"
    if matrix_url:
        return matrix_url, "the matrix's [history] url"
    return default_url(results_dir), "beside the run folders"


def shown(url: str) -> str:
    """The URL without its password (scheme://user:***@host/...): wherever a URL is shown."""
    return settings.password_hidden(url)
