"""Which database the history is, and opening it at the current schema.

The URL, first found (history/destination.py): `--db URL` on the command line, the host's
DL_BENCH_HISTORY_URL, `[history] url` in the matrix, else the embedded default
`sqlite:///<results>/history.sqlite`. A team points every VM at one PostgreSQL server
(`postgresql://user@host/db`, driven by psycopg 3: the `postgres` extra, so that
the host's own install needs no database driver).
Every open upgrades the schema to the newest Alembic revision first (idempotent), so an older
database is migrated in place, never recreated; runs that create or migrate it at once take turns
(`hold_for_writing`), and a database holding another application's tables is refused.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from ..errors import UsageError
from ..paths import RESULTS_DIR
from .. import settings
from .destination import default_url, resolve, shown
from .tables import metadata

__all__ = ["HistoryError", "default_url", "open_history", "resolve_url", "shown"]

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class HistoryError(Exception):
    """The database cannot be reached or written (one line, no traceback)."""


def resolve_url(given: str | None = None, matrix_url: str | None = None,
                results_dir: Path = RESULTS_DIR) -> str:
    return resolve(given, matrix_url, results_dir)[0]


def _driver_url(url: str) -> str:
    """postgresql:// means psycopg 3 here (SQLAlchemy's own default would be psycopg2)."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def engine_for(url: str, create: bool = True) -> Engine:
    """An engine on the history at `url` (the URL judged as DL_BENCH_HISTORY_URL is); a SQLite
    file that does not exist is made (its folder too) only where `create` (a writer: a run,
    `history import`), else refused (UsageError)."""
    try:
        settings.history_url(url)
        parsed = make_url(url)
    except (ValueError, ArgumentError) as exc:
        raise UsageError(f"history URL {shown(url)!r}: expected "
                         f"{exc if isinstance(exc, ValueError) else settings.HISTORY_URL_FORMS}"
                         ) from None
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        if not create and not Path(parsed.database).is_file():
            raise UsageError(f"history database {shown(url)}: no such file (a reading "
                             "command never makes one; a run or `history import` does)")
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = create_engine(_driver_url(url))
    except ModuleNotFoundError as exc:    # psycopg: the `postgres` extra, not the host's core
        raise UsageError(f"history URL {shown(url)}: its driver is not installed ({exc.name}); "
                         f"install the extra: pip install 'dl-bench-runner[postgres]' "
                         "(in a checkout: .venv/bin/pip install -e '.[postgres]')") from None
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # Foreign keys (cascading deletes) are off by default in SQLite; WAL lets a reader (the site,
    # `history list`) work while a run writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def alembic_config(connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


# One key for the whole history on a PostgreSQL server: its transactions that write take it.
ADVISORY_KEY = 0x646C62656E6368      # "dlbench"


def hold_for_writing(connection: Connection) -> None:
    """Make the connection's transaction the only one writing the history until it ends, before
    it reads anything: three runs that create or migrate a new database at once then do it one
    after the other, each finding the others' tables (SQLite would otherwise run each DDL
    statement outside any transaction: "table runs already exists")."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")     # waits up to busy_timeout
    elif connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})


def foreign_tables(connection: Connection) -> list[str]:
    """The database's tables that are not the runner's (another application's file): those of
    other names, and those named like the runner's in a database its migrations never made
    (no alembic_version: a `runs` of another application's)."""
    names = [n for n in inspect(connection).get_table_names() if not n.startswith("sqlite_")]
    ours = {*metadata.tables, "alembic_version"}
    if "alembic_version" not in names:
        ours = set()
    return sorted(name for name in names if name not in ours)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (create it from empty when the database is new), in one
    transaction that no other runner's can interleave with; HistoryError when the database
    holds tables that are not the runner's (nothing is written into it then)."""
    from alembic import command
    from alembic.util import CommandError

    with engine.begin() as connection:
        hold_for_writing(connection)
        others = foreign_tables(connection)
        if others:
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            raise HistoryError(f"it holds tables that are not the runner's "
                               f"({', '.join(others[:3])}{more}); a history needs a database "
                               "of its own")
        try:
            command.upgrade(alembic_config(connection), revision)
        except CommandError as exc:     # an alembic_version of another application's
            raise HistoryError(f"its schema version is not one of the runner's ({exc}); a "
                               "history needs a database of its own") from None


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def open_history(url: str, create: bool = True) -> Engine:
    """An engine on an up-to-date schema; HistoryError (one line) when unreachable. A reader
    (`create` False) never makes a SQLite file that is not there."""
    engine = engine_for(url, create)
    try:
        upgrade(engine)
    except (SQLAlchemyError, HistoryError) as exc:
        engine.dispose()
        raise HistoryError(f"history database {shown(url)}: {one_line(exc)}") from None
    return engine


def one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
