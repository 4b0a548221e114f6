"""bisects and their steps (runner bisect)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bisects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cell_name", sa.String(300), nullable=False),
        sa.Column("environment_name", sa.String(100), nullable=False),
        sa.Column("run_good", sa.String(200), nullable=False),
        sa.Column("run_bad", sa.String(200), nullable=False),
        sa.Column("started_at", sa.String(32), nullable=False),
        sa.Column("finished_at", sa.String(32)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("culprit", sa.JSON()),
        sa.Column("changed", sa.JSON()),
        sa.Column("message", sa.Text()),
        sa.PrimaryKeyConstraint("id", name="pk_bisects"),
    )
    op.create_index("ix_bisects_cell_name", "bisects", ["cell_name"])
    op.create_table(
        "bisect_steps",
        sa.Column("bisect", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("taken", sa.JSON(), nullable=False),
        sa.Column("lock_sha256", sa.String(64)),
        sa.Column("resolved", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("repeat_medians_ms", sa.JSON()),
        sa.Column("median_ms", sa.Float()),
        sa.Column("ratio_to_good", sa.Float()),
        sa.Column("verdict", sa.String(20)),
        sa.ForeignKeyConstraint(["bisect"], ["bisects.id"], name="fk_bisect_steps_bisect_bisects",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("bisect", "step", name="pk_bisect_steps"),
    )


def downgrade() -> None:
    op.drop_table("bisect_steps")
    op.drop_table("bisects")
