"""How long cells took before: the wall time of a worker process (one repeat) of every cell that
finished ok in the history database, with what it was and where it ran. Read-only: a database
that does not exist yet is never created (`plan` writes nothing), one that cannot be read is no
history (the estimate falls back), and no migration runs. Each cell found is the estimate's
input, cost/estimate.py's PastCell: the history reads cost/, never the reverse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..cost.estimate import PastCell

MAX_ROWS = 5000             # the newest cells only: an estimate, not an archive


def device_of(summary: dict[str, Any], gpu_name: str | None, cpu_model: str | None) -> str | None:
    return gpu_name if summary.get("on_gpu") and gpu_name else cpu_model


def past_cells(url: str) -> list[PastCell] | None:
    """The history's ok cells, newest first; None when there is no readable history."""
    from sqlalchemy import select
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from . import tables
    from .db import engine_for

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() == "sqlite" and not (parsed.database and
                                                       Path(parsed.database).is_file()):
        return None                      # no history yet: never create one for an estimate
    c, r = tables.cells, tables.runs
    query = (select(c.c.cell_id, c.c.cell_name, c.c.environment_name, c.c.workload, c.c.task,
                    c.c.batch_size, c.c.summary, r.c.gpu_name, r.c.cpu_model, r.c.started_at)
             .join(r, r.c.id == c.c.run).where(c.c.status == "ok")
             .order_by(r.c.started_at.desc(), c.c.id.desc()).limit(MAX_ROWS))
    try:
        engine = engine_for(url)
        try:
            with engine.connect() as conn:
                rows = list(conn.execute(query))
        finally:
            engine.dispose()
    except (SQLAlchemyError, OSError, Exception):     # any unreadable history: no history
        return None
    found = []
    for row in rows:
        summary = row.summary if isinstance(row.summary, dict) else {}
        wall = summary.get("wall_s")
        if not isinstance(wall, (int, float)) or wall <= 0:
            continue
        found.append(PastCell(row.cell_id, row.cell_name, row.environment_name, row.workload,
                              row.task, summary.get("api"), summary.get("size"), row.batch_size,
                              device_of(summary, row.gpu_name, row.cpu_model), float(wall),
                              row.started_at or ""))
    return found
