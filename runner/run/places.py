"""Where a run's files go besides its run folder: the results folder it lies in (which holds
machine-profiles/ and, by default, the history database) and the history database itself."""

from __future__ import annotations

from pathlib import Path

from .state import RunState


def results_folder(state: RunState) -> Path:
    """The results folder of the run: its run folder's (a resumed run's, wherever
    --results-dir points), else --results-dir."""
    if state.progress.store is not None:
        return state.store.root.parent.parent
    if isinstance(state.opts.resume, Path):
        return state.opts.resume.expanduser().resolve().parent.parent
    return state.opts.results_dir
