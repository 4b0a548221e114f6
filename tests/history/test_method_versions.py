"""A method version per cell in the history (runner/version.py): the migration that gives
every stored cell row one (its run's runner_version: what it was measured with), and the trend
that stays continuous over a runner update that left a cell's code alone and is cut, and marked,
where the cell's method changed. SQLite and PostgreSQL alike."""

from __future__ import annotations

from sqlalchemy import select

from runner.history import changepoints, db, site, tables
from runner.history.queries import series

from .runs import insert_rows, old_cell, old_run, write_run

CELL = "cnn-fit-keras-jax-b128"


def test_the_migration_gives_old_rows_their_runs_runner_version(history_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = db.engine_for(history_url)
    db.upgrade(engine, "0002")                    # a database the previous runner made
    runs = [old_run(1, "old/1", "aaaaaaaaaaaa"), old_run(2, "old/2", "aaaaaaaaaaaa"),
            old_run(3, "old/3", "bbbbbbbbbbbb"), old_run(4, "old/4", None)]
    insert_rows(engine, runs=runs,
                cells=[old_cell(n, n, 50.0 + n) for n in (1, 2, 3, 4)])
    db.upgrade(engine)
    assert db.current_revision(engine) == "0003"
    with engine.connect() as conn:
        found = dict(conn.execute(select(tables.cells.c.run, tables.cells.c.method_version)).all())
        assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
    assert found == {1: "aaaaaaaaaaaa", 2: "aaaaaaaaaaaa", 3: "bbbbbbbbbbbb", 4: None}
    points = series(engine, CELL)                 # still readable, oldest first
    assert [p.median_ms for p in points] == [51.0, 52.0, 53.0, 54.0]
    assert [p.method_changed for p in points] == [False, False, True, True]
    assert points[2].change is not None
    assert points[2].change.changed["method_version"] == ("aaaaaaaaaaaa", "bbbbbbbbbbbb")
    db.upgrade(engine, "0002")                    # and back: the column goes, the rows stay
    with engine.connect() as conn:
        assert len(conn.execute(select(tables.runs.c.id)).all()) == 4
    engine.dispose()


def test_a_runner_update_that_left_the_cell_alone_keeps_its_trend(history, history_url,
                                                                  tmp_path):
    # Twelve runs by three runner versions, one method: a 25 % slowdown at the ninth run is
    # the stack's, found as before; no runner update shows as a change.
    for i in range(12):
        history("import", write_run(tmp_path, "kept", i, level=1.25 if i >= 8 else 1.0,
                                    noise=0.02, seed=i, method="cccccccccccc",
                                    runner=f"{i // 4:012d}"))
    code, out, _ = history("regressions", "--cell", CELL)
    assert code == 1 and "kept/20260109T000000Z" in out
    engine = db.engine_for(history_url)
    points = series(engine, CELL)
    engine.dispose()
    assert not any(p.method_changed for p in points)
    assert all(p.change is None or "runner_version" not in p.change.changed for p in points)


def test_a_method_change_cuts_the_trend_and_is_marked(history, history_url, tmp_path):
    # The same 25 % step, but the ninth run measured the cell by another method: not a
    # regression, a method change; the trend marks it.
    for i in range(12):
        history("import", write_run(tmp_path, "moved", i, level=1.25 if i >= 8 else 1.0,
                                    noise=0.02, seed=i,
                                    method="dddddddddddd" if i >= 8 else "cccccccccccc"))
    code, out, _ = history("regressions", "--cell", CELL)
    assert code == 0 and "0 new slowdowns" in out
    code, out, _ = history("show", CELL)
    row = next(line for line in out.splitlines() if "moved/20260109T000000Z" in line)
    assert "method_version cccccccccccc → dddddddddddd" in row
    engine = db.engine_for(history_url)
    points = series(engine, CELL)
    assert changepoints.method_changes(points) == [points[8]]
    assert changepoints.method_segments(points) == [(0, 8), (8, 12)]
    index = site.write_site(engine, tmp_path / "site")
    engine.dispose()
    pages = [p.read_text() for p in (index.parent / "families").glob("*.html")]
    page = next(p for p in pages if CELL in p)
    (section,) = [part for part in page.split("<h2")[1:] if f"({CELL})" in part]
    assert section.count("method changed</span>") == 1          # once, at its run
    assert section.index("method changed") > section.index("moved/20260109T000000Z")
