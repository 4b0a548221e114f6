"""Alembic's environment: run by runner.history.db.upgrade with an open connection (there is no
alembic.ini; `runner history` upgrades the database itself before using it)."""

from alembic import context

from runner.history.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
