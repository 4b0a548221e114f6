"""The end of every run (and --resume): the run folder into the history. A history that cannot
be written costs one warning line, never the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import user_text

if TYPE_CHECKING:
    from ..results.analysis.report_model import RunAnalysis


def record_finished_run(run_dir: Path, url: str, console,
                        analysed: RunAnalysis | None = None) -> None:
    """The run folder into the history at `url` (the pipeline's history_destination), from the
    analysis its reports were written from (`analysed`; None: the folder is analysed here)."""
    try:
        from . import db, ingest

        engine = db.open_history(url)
        try:
            # The manifest's runner_version, as an import of the folder would store it (not
            # the package's version: a run and its later import read the same).
            done = ingest.import_run(engine, run_dir, origin="run", analysed=analysed)
        finally:
            engine.dispose()
        console.print(f"history: {done.action} {user_text(done.run_id)} in "
                      f"{user_text(db.shown(url))}", soft_wrap=True)
        for warning in done.warnings:
            console.print(f"[yellow]! history: {user_text(warning)}[/]", soft_wrap=True)
    except Exception as exc:  # the run is finished: never fail it here
        text = str(exc).strip().splitlines()
        console.print(f"[yellow]! history: not recorded ({type(exc).__name__}: "
                      f"{user_text(text[0] if text else '')})[/]", soft_wrap=True)
