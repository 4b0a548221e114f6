"""The run's last step: its history (history/), where it goes and why, recorded, or said why
not and how to record it.

By default the history lies beside the run folders: a new run's results folder, or a resumed
run's own (RUN_DIR/../.., wherever --results-dir points) — when RUN_DIR is where runs are kept
(`<results>/<run name>/<timestamp>`) and that folder is not one anybody may write (a system temp
folder such as /tmp, where another user could have put a database of their own). Otherwise
--results-dir's (by default the checkout's results/)."""

from __future__ import annotations

import stat
from pathlib import Path

from ..errors import user_text
from .resume import history_import_command
from .state import RunState


def resumed_results(run_dir: Path, run_name: str) -> Path | None:
    """The results folder a resumed run folder lies in, or None when it lies elsewhere."""
    results = run_dir.parent.parent
    try:
        open_to_all = bool(results.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return None
    return results if run_dir.parent.name == run_name and not open_to_all else None


def history_destination(state: RunState) -> tuple[str, str]:
    """Where the run's history goes and why (history/destination.py)."""
    from ..history import destination

    if state.progress.store is not None:
        run_dir: Path | None = state.store.root
    elif isinstance(state.opts.resume, Path):
        run_dir = state.opts.resume.expanduser().resolve()
    else:
        run_dir = None
    results = state.opts.results_dir
    if run_dir is not None and state.opts.resume:
        results = resumed_results(run_dir, state.matrix.spec.run.name) or results
    elif run_dir is not None:
        results = run_dir.parent.parent
    return destination.resolve(None, state.matrix.spec.history.url, results)


def write_history(state: RunState) -> None:
    """The finished run into its history; an interrupted one is not (nor one interrupted while
    it is recorded), and the run says so and how to record it."""
    if not state.opts.history:
        return
    if state.progress.interrupted is not None:
        say_not_recorded(state, "the run was interrupted")
        return
    from ..history import record

    try:
        record.record_finished_run(state.store.root, history_destination(state)[0],
                                   state.console, state.progress.analysed)
    except KeyboardInterrupt as exc:    # its transaction rolled back: nothing half recorded
        state.progress.interrupted = exc
        say_not_recorded(state, "the run was interrupted while it was recorded")


STOPPED = {"budget": "the run stopped at its budget", "max_hours": "the run stopped at its hours"}


def say_not_recorded(state: RunState, why: str | None = None) -> None:
    """That the run is not in its history, why (default: how it stopped), and the command that
    records it as it is."""
    if not state.opts.history:
        return
    stopped = state.progress.stopped
    why = why or STOPPED.get(stopped.by if stopped is not None else "",
                             "the run stopped: its executor was lost")
    command = history_import_command(state.store.root, history_destination(state)[0])
    state.console.print(f"[yellow]! history: not recorded ({why}); its --resume records it, or "
                        f"record the run as it is: {user_text(command)}[/]", soft_wrap=True)
