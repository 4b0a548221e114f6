"""The pipeline's step that prepares the run's environments, with their progress shown
(run/displays.py): each source's environment built, or found ready, once."""

from __future__ import annotations

import time
from typing import Any

from ..environments import LOCKS, Source, folder_flavour, installed, lock_of
from . import console as show
from .displays import build_display
from .manifest import stack_builds
from .setup import Setup
from .state import RunState


def packages_of(setup: Setup, source: Source) -> int | None:
    """How many distributions the source's lock installs (None: not built from a lock)."""
    if source.folder is None:
        return None
    # A Ray run's nodes each pick their flavour: the CPU lock's count stands for theirs.
    flavour = folder_flavour(setup.flavour, source.folder) if setup.flavour.name in LOCKS \
        else "cpu"
    try:
        return len(installed.lock_pins(lock_of(source, flavour)))
    except OSError:
        return None


def builds_metadata(setup: Setup, source: Source) -> dict[str, Any]:
    """What every record of a derived stack says of its builds that are no release (a
    channel's dated build, a local wheel or tree): `stack_builds`, as the manifest has them."""
    found = next((s for s in setup.stacks.values() if s.source().key == source.key), None)
    return {"stack_builds": stack_builds(found)} if found is not None and found.builds else {}


def prepare_environments(state: RunState) -> None:
    """Build (or find ready) each source's environment: a progress row while it builds (a
    plain line in a log), then one line for those ready (a failure or a warning at once)."""
    ready_in: dict[str, float] = {}
    with build_display(state.console) as display:
        for source in state.sources:
            executor = state.setup.executor_for(source)
            started = time.monotonic()
            say = display.start(source.key, packages_of(state.setup, source),
                                executor.is_ready(source))
            ready = executor.prepare(source, say)
            ready.metadata.update(builds_metadata(state.setup, source))
            display.finish(source.key)
            state.progress.prepared[source.key] = ready
            if show.show_prepared(source.key, ready, state.console):
                ready_in[source.key] = time.monotonic() - started
    show.show_ready(ready_in, state.console)
