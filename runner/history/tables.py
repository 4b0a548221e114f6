"""The history database's schema, defined once (SQLAlchemy Core). The Alembic migrations in
migrations/versions/ create and upgrade a database to exactly this; a test compares the two.

Raw samples are not copied: each repeat row names its record file in the run folder and the
file's sha256, so a number can always be traced back to (and checked against) what was measured.
"""

from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, Float, ForeignKey, Integer, MetaData, String,
                        Table, Text, UniqueConstraint)

# Constraint names fixed by convention, so SQLite and PostgreSQL migrations name them alike.
metadata = MetaData(naming_convention={
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", String(200), nullable=False, unique=True),   # <name>/<timestamp>
    Column("name", String(100), nullable=False, index=True),
    Column("content_sha256", String(64), nullable=False),         # of manifest + every record
    Column("path", Text),                                          # the run folder when imported
    Column("origin", String(20), nullable=False),                  # run | import | bisect
    Column("started_at", String(32), index=True),                  # ISO 8601, UTC
    Column("finished_at", String(32)),
    Column("interrupted", Boolean),
    Column("imported_at", String(32), nullable=False),
    Column("host_name", String(200), index=True),
    Column("gpu_name", String(200), index=True),
    Column("gpu_count", Integer),
    Column("driver_version", String(50)),
    Column("cpu_model", String(200)),
    Column("runner_version", String(50)),
    Column("executor", String(20)),
    Column("profile", String(20)),
    Column("flavour", String(20)),
    Column("manifest", JSON),
)

environments = Table(
    "environments", metadata,
    Column("id", Integer, primary_key=True),
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(100), nullable=False),
    Column("api", String(20)),
    Column("backend", String(20)),
    Column("image", Text),              # folder under images/, or REGISTRY/NAME@sha256:…
    Column("python", Text),             # an existing interpreter (python = …)
    Column("lock_sha256", String(64)),
    Column("image_id", String(100)),
    Column("image_digest", Text),
    Column("distributions_sha256", String(64)),
    Column("python_version", String(20)),
    Column("framework_name", String(50)),
    Column("framework_version", String(50)),
    Column("driver_version", String(50)),
    Column("gpu_name", String(200)),
    UniqueConstraint("run", "name"),
)

distributions = Table(
    "distributions", metadata,
    Column("environment", Integer, ForeignKey("environments.id", ondelete="CASCADE"),
           primary_key=True),
    Column("name", String(200), primary_key=True),     # canonical (PEP 503) name
    Column("version", String(100), nullable=False),
)

cells = Table(
    "cells", metadata,
    Column("id", Integer, primary_key=True),
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("environment", Integer, ForeignKey("environments.id", ondelete="CASCADE")),
    Column("cell_id", String(64), nullable=False, index=True),
    Column("cell_name", String(300), nullable=False, index=True),   # the series key
    Column("label", String(300), nullable=False),                    # row of the report
    Column("environment_name", String(100), nullable=False),
    Column("workload", String(50)),
    Column("task", String(20)),
    Column("batch_size", Integer),
    Column("status", String(20), nullable=False),
    Column("repeats", Integer),
    Column("repeats_ok", Integer),
    Column("samples", Integer),
    Column("median_ms", Float),
    Column("ci_low_ms", Float),
    Column("ci_high_ms", Float),
    Column("mean_ms", Float),
    Column("cv", Float),
    Column("repeat_medians_ms", JSON),
    Column("warnings", JSON),
    Column("summary", JSON),          # everything else the run's summary held
    # Revision 3: the worker code and timing method the cell was measured with (its records'
    # metadata method_version; runner/version.py). A row stored before it has its run's
    # runner_version: the whole runner was then every cell's method.
    Column("method_version", String(50)),
    UniqueConstraint("run", "cell_id"),
)

repeats = Table(
    "repeats", metadata,
    Column("cell", Integer, ForeignKey("cells.id", ondelete="CASCADE"), primary_key=True),
    Column("repeat", Integer, primary_key=True),
    Column("status", String(20), nullable=False),
    Column("samples", Integer),
    Column("median_ms", Float),
    Column("record_path", Text, nullable=False),     # relative to the run folder
    Column("record_sha256", String(64), nullable=False),
)

# Revision 2: `runner bisect` — which changed distribution moved a cell's number.
bisects = Table(
    "bisects", metadata,
    Column("id", Integer, primary_key=True),
    Column("cell_name", String(300), nullable=False, index=True),
    Column("environment_name", String(100), nullable=False),
    Column("run_good", String(200), nullable=False),
    Column("run_bad", String(200), nullable=False),
    Column("started_at", String(32), nullable=False),
    Column("finished_at", String(32)),
    Column("status", String(20), nullable=False),      # running | named | inconclusive | failed
    Column("culprit", JSON),                            # the distributions named
    Column("changed", JSON),                            # every changed distribution: old → new
    Column("message", Text),
)

bisect_steps = Table(
    "bisect_steps", metadata,
    Column("bisect", Integer, ForeignKey("bisects.id", ondelete="CASCADE"), primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("taken", JSON, nullable=False),        # distributions taken from the bad stack
    Column("lock_sha256", String(64)),
    Column("resolved", Boolean, nullable=False),
    Column("error", Text),
    Column("repeat_medians_ms", JSON),
    Column("median_ms", Float),
    Column("ratio_to_good", Float),
    Column("verdict", String(20)),                # good | bad | unresolvable | failed
)
