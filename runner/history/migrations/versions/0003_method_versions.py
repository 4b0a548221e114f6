"""a method version per cell (cells.method_version)

Until now a run's `runner_version` (a digest of the whole worker) was every cell's method: any
change to the worker made every cell "not comparable". From this revision each cell row holds
its own method version, the digest of the worker code that cell runs. A row stored before has
none of its own: it gets its run's runner_version, what it was measured with, so old rows stay
comparable among themselves exactly as before (one runner, one method) and a newer row differs
from them (the first run after the upgrade shows as a method change on every trend, once).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("method_version", sa.String(50)))
    cells = sa.table("cells", sa.column("run", sa.Integer()),
                     sa.column("method_version", sa.String(50)))
    runs = sa.table("runs", sa.column("id", sa.Integer()),
                    sa.column("runner_version", sa.String(50)))
    op.execute(cells.update().values(method_version=(
        sa.select(runs.c.runner_version).where(runs.c.id == cells.c.run).scalar_subquery())))


def downgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("method_version")
