"""runs, environments and their distributions, cells and their repeats

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("path", sa.Text()),
        sa.Column("origin", sa.String(20), nullable=False),
        sa.Column("started_at", sa.String(32)),
        sa.Column("finished_at", sa.String(32)),
        sa.Column("interrupted", sa.Boolean()),
        sa.Column("imported_at", sa.String(32), nullable=False),
        sa.Column("host_name", sa.String(200)),
        sa.Column("gpu_name", sa.String(200)),
        sa.Column("gpu_count", sa.Integer()),
        sa.Column("driver_version", sa.String(50)),
        sa.Column("cpu_model", sa.String(200)),
        sa.Column("runner_version", sa.String(50)),
        sa.Column("executor", sa.String(20)),
        sa.Column("profile", sa.String(20)),
        sa.Column("flavour", sa.String(20)),
        sa.Column("manifest", sa.JSON()),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("run_id", name="uq_runs_run_id"),
    )
    for column in ("name", "started_at", "host_name", "gpu_name"):
        op.create_index(f"ix_runs_{column}", "runs", [column])
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("api", sa.String(20)),
        sa.Column("backend", sa.String(20)),
        sa.Column("image", sa.Text()),
        sa.Column("python", sa.Text()),
        sa.Column("lock_sha256", sa.String(64)),
        sa.Column("image_id", sa.String(100)),
        sa.Column("image_digest", sa.Text()),
        sa.Column("distributions_sha256", sa.String(64)),
        sa.Column("python_version", sa.String(20)),
        sa.Column("framework_name", sa.String(50)),
        sa.Column("framework_version", sa.String(50)),
        sa.Column("driver_version", sa.String(50)),
        sa.Column("gpu_name", sa.String(200)),
        sa.ForeignKeyConstraint(["run"], ["runs.id"], name="fk_environments_run_runs",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_environments"),
        sa.UniqueConstraint("run", "name", name="uq_environments_run"),
    )
    op.create_index("ix_environments_run", "environments", ["run"])
    op.create_table(
        "distributions",
        sa.Column("environment", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("version", sa.String(100), nullable=False),
        sa.ForeignKeyConstraint(["environment"], ["environments.id"],
                                name="fk_distributions_environment_environments",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("environment", "name", name="pk_distributions"),
    )
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("environment", sa.Integer()),
        sa.Column("cell_id", sa.String(64), nullable=False),
        sa.Column("cell_name", sa.String(300), nullable=False),
        sa.Column("label", sa.String(300), nullable=False),
        sa.Column("environment_name", sa.String(100), nullable=False),
        sa.Column("workload", sa.String(50)),
        sa.Column("task", sa.String(20)),
        sa.Column("batch_size", sa.Integer()),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("repeats", sa.Integer()),
        sa.Column("repeats_ok", sa.Integer()),
        sa.Column("samples", sa.Integer()),
        sa.Column("median_ms", sa.Float()),
        sa.Column("ci_low_ms", sa.Float()),
        sa.Column("ci_high_ms", sa.Float()),
        sa.Column("mean_ms", sa.Float()),
        sa.Column("cv", sa.Float()),
        sa.Column("repeat_medians_ms", sa.JSON()),
        sa.Column("warnings", sa.JSON()),
        sa.Column("summary", sa.JSON()),
        sa.ForeignKeyConstraint(["run"], ["runs.id"], name="fk_cells_run_runs",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["environment"], ["environments.id"],
                                name="fk_cells_environment_environments", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_cells"),
        sa.UniqueConstraint("run", "cell_id", name="uq_cells_run"),
    )
    for column in ("run", "cell_id", "cell_name"):
        op.create_index(f"ix_cells_{column}", "cells", [column])
    op.create_table(
        "repeats",
        sa.Column("cell", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("samples", sa.Integer()),
        sa.Column("median_ms", sa.Float()),
        sa.Column("record_path", sa.Text(), nullable=False),
        sa.Column("record_sha256", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(["cell"], ["cells.id"], name="fk_repeats_cell_cells",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("cell", "repeat", name="pk_repeats"),
    )


def downgrade() -> None:
    for table in ("repeats", "cells", "distributions", "environments", "runs"):
        op.drop_table(table)
