"""Reading the history: runs, a cell's series across runs, an environment's stack, and what
changed between two stacks."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version
from sqlalchemy import and_, case, func, select
from sqlalchemy.engine import Engine

from ..errors import UsageError
from . import tables

RUN_KEYS = ("driver_version", "gpu_name", "runner_version", "host_name", "cpu_model")
# What a stack diff names of the run (and, for a point of a series, of its cell): the cell's
# method version is a change of method (runner/version.py), the runner's version only says
# which runner measured; a point's stack holds the first, a run's the second.
DIFF_RUN_KEYS = ("method_version", "runner_version", "host_name")
STACK_META = ("lock_sha256", "image_digest", "image_id", "python_version", "driver_version",
              "gpu_name")


def list_runs(engine: Engine, name: str | None = None, host: str | None = None,
              gpu: str | None = None, since: str | None = None,
              until: str | None = None) -> list[dict[str, Any]]:
    """Runs oldest first, with their cell counts; name/host/gpu are globs, since/until ISO dates
    (a date alone means the whole day)."""
    r, c = tables.runs, tables.cells
    counts = (select(c.c.run, func.count().label("cells"),
                     func.sum(case((c.c.status == "ok", 1), else_=0)).label("ok"))
              .group_by(c.c.run).subquery())
    query = (select(r, counts.c.cells, counts.c.ok).outerjoin(counts, counts.c.run == r.c.id)
             .order_by(r.c.started_at, r.c.id))
    if since:
        query = query.where(r.c.started_at >= since)
    if until:
        query = query.where(r.c.started_at <= until + ("T23:59:59Z" if len(until) == 10 else ""))
    rows = [dict(row._mapping) for row in _all(engine, query)]
    for key, pattern in (("name", name), ("host_name", host), ("gpu_name", gpu)):
        if pattern:
            rows = [row for row in rows if fnmatch.fnmatch(str(row[key] or ""), pattern)]
    return rows


def _all(engine: Engine, query) -> list:
    with engine.connect() as conn:
        return list(conn.execute(query))


def run_row(engine: Engine, run_id: str) -> dict[str, Any]:
    """A stored run by its id (name/timestamp) or its folder's path."""
    r = tables.runs
    rows = _all(engine, select(r).where((r.c.run_id == run_id) | (r.c.path == run_id)))
    if not rows:
        from pathlib import Path

        path = Path(run_id)
        if path.is_dir():
            rows = _all(engine, select(r).where(r.c.path == str(path.resolve())))
    if not rows:
        raise UsageError(f"{run_id}: no such run in the history (python -m runner history list "
                         "shows them; python -m runner history import RUN_DIR stores one)")
    return dict(rows[0]._mapping)


def cell_names(engine: Engine, pattern: str) -> list[str]:
    """The series a CELL argument names: a cell name, a cell id, or a glob of names."""
    c = tables.cells
    exact = _all(engine, select(c.c.cell_name).where((c.c.cell_name == pattern)
                                                      | (c.c.cell_id == pattern)).distinct())
    if exact:
        return sorted({row.cell_name for row in exact})
    names = {row.cell_name for row in _all(engine, select(c.c.cell_name).distinct())}
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def resolve_cell(engine: Engine, pattern: str) -> str:
    found = cell_names(engine, pattern)
    if not found:
        raise UsageError(f"{pattern}: no cell of that name or id in the history")
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise UsageError(f"{pattern}: names {len(found)} cells ({shown}); give one")
    return found[0]


@dataclass
class Point:
    """One run's measurement of a cell."""

    run_pk: int
    run_id: str
    started_at: str | None
    status: str
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    repeat_medians_ms: list[float]
    environment_pk: int | None
    environment: str
    label: str
    batch_size: int | None
    stack: dict[str, Any] = field(default_factory=dict)
    change: StackDiff | None = None       # against the previous point's stack
    # generate cells: time to first token and decode latency per token
    # (results/analysis/decoding.py)
    ttft_ms: float | None = None
    decode_ms_per_token: float | None = None
    usd_per_1k_items: float | None = None     # at the run's list price ([cost]), where it had one
    # The worker code and timing method it was measured with (cells.method_version): points of
    # two method versions are not comparable; the trend marks where it changes.
    method_version: str | None = None

    @property
    def time_ms(self) -> float | None:
        """The point's time as the run's reports give it (geomean_ms)."""
        return run_time(self.repeat_medians_ms, self.median_ms)

    @property
    def method_changed(self) -> bool:
        """This point was measured by another method than the point before."""
        return self.change is not None and "method_version" in self.change.changed


def run_time(repeat_medians: Any, median_ms: float | None) -> float | None:
    """A cell's time by the run's own estimator (results/analysis/summaries.py TIME_KEY): the
    geometric mean of its repeat medians; a row without them keeps its stored median of the
    repeat medians."""
    values = [float(v) for v in repeat_medians or [] if isinstance(v, (int, float)) and v > 0]
    if not values:
        return median_ms
    return math.exp(sum(math.log(v) for v in values) / len(values))


def series(engine: Engine, cell_name: str) -> list[Point]:
    """The cell's points across runs, oldest first, each with its stack and what changed in it
    since the point before."""
    r, c = tables.runs, tables.cells
    query = (select(r.c.id.label("run_pk"), r.c.run_id, r.c.started_at, c.c.status, c.c.median_ms,
                    c.c.ci_low_ms, c.c.ci_high_ms, c.c.repeat_medians_ms, c.c.environment,
                    c.c.environment_name, c.c.label, c.c.batch_size, r.c.driver_version,
                    r.c.gpu_name, c.c.method_version, c.c.summary)
             .join(r, r.c.id == c.c.run).where(c.c.cell_name == cell_name)
             .order_by(r.c.started_at, r.c.id))
    points, code = [], {}
    for row in _all(engine, query):
        points.append(Point(row.run_pk, row.run_id, row.started_at, row.status, row.median_ms,
                            row.ci_low_ms, row.ci_high_ms, list(row.repeat_medians_ms or []),
                            row.environment, row.environment_name, row.label, row.batch_size,
                            method_version=row.method_version))
        code[id(points[-1])] = user_code_digest(row.summary)
        points[-1].ttft_ms, points[-1].decode_ms_per_token = first_token(row.summary)
        points[-1].usd_per_1k_items = summary_figure(row.summary, "usd_per_1k_items")
    stacks = environment_stacks(engine, [p.environment_pk for p in points if p.environment_pk])
    runs: dict[int | None, dict[str, Any]] = {row["id"]: row for row in (dict(x._mapping) for x in _all(
        engine, select(r).where(r.c.id.in_([p.run_pk for p in points]))))}
    previous = None
    for point in points:
        env_stack = stacks.get(point.environment_pk, {}) if point.environment_pk else {}
        run = {k: runs[point.run_pk].get(k) for k in RUN_KEYS if k != "runner_version"}
        point.stack = {**env_stack, "run": {**run, "method_version": point.method_version},
                       "workload_sha256": code[id(point)]}
        if previous is not None:
            point.change = diff_stacks(previous.stack, point.stack)
        previous = point
    return points


def summary_figure(summary: Any, key: str) -> float | None:
    value = summary.get(key) if isinstance(summary, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def first_token(summary: Any) -> tuple[float | None, float | None]:
    """A generate cell's time to first token and decode ms per token, from its stored summary."""
    if not isinstance(summary, dict):
        return None, None
    values = [summary.get(k) for k in ("ttft_ms", "decode_ms_per_token")]
    ttft, decode = (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
                    for v in values)
    return ttft, decode


def user_code_digest(summary: Any) -> str | None:
    """A user workload's code digest, from a cell's stored summary (None: a built-in one)."""
    user = summary.get("user_workload") if isinstance(summary, dict) else None
    return user.get("sha256") if isinstance(user, dict) else None


def environment_stacks(engine: Engine, pks: list[int]) -> dict[int, dict[str, Any]]:
    """environment pk → {"meta": {...}, "distributions": {name: version}}."""
    if not pks:
        return {}
    e, d = tables.environments, tables.distributions
    out: dict[int, dict[str, Any]] = {}
    for row in _all(engine, select(e).where(e.c.id.in_(pks))):
        m = dict(row._mapping)
        out[m["id"]] = {"name": m["name"], "meta": {k: m.get(k) for k in STACK_META
                                                     + ("distributions_sha256",
                                                        "framework_name", "framework_version")},
                        "distributions": {}}
    for row in _all(engine, select(d).where(d.c.environment.in_(pks))):
        out[row.environment]["distributions"][row.name] = row.version
    return out


def run_stacks(engine: Engine, run_pk: int) -> dict[str, dict[str, Any]]:
    """environment name → stack of one run (with the run's own driver, GPU, runner version)."""
    e = tables.environments
    pks = {row.id: row.name for row in _all(engine, select(e.c.id, e.c.name)
                                             .where(e.c.run == run_pk))}
    stacks = environment_stacks(engine, list(pks))
    run = dict(_all(engine, select(tables.runs).where(tables.runs.c.id == run_pk))[0]._mapping)
    return {pks[pk]: {**stack, "run": {k: run.get(k) for k in RUN_KEYS}}
            for pk, stack in stacks.items()}


@dataclass
class StackDiff:
    added: dict[str, str] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    upgraded: dict[str, tuple[str, str]] = field(default_factory=dict)
    downgraded: dict[str, tuple[str, str]] = field(default_factory=dict)
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)   # lock, driver, GPU, …

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.upgraded or self.downgraded or self.changed)

    def distributions(self) -> dict[str, tuple[str | None, str | None]]:
        """Every changed distribution: name → (version in A or None, version in B or None)."""
        out: dict[str, tuple[str | None, str | None]] = {n: (None, v) for n, v in self.added.items()}
        out |= {n: (v, None) for n, v in self.removed.items()}
        out |= self.upgraded | self.downgraded
        return dict(sorted(out.items()))

    def lines(self) -> list[str]:
        out = [f"{k} {_short(a)} → {_short(b)}" for k, (a, b) in self.changed.items()]
        out += [f"+ {n} {v}" for n, v in self.added.items()]
        out += [f"- {n} {v}" for n, v in self.removed.items()]
        out += [f"↑ {n} {a} → {b}" for n, (a, b) in self.upgraded.items()]
        out += [f"↓ {n} {a} → {b}" for n, (a, b) in self.downgraded.items()]
        return out

    def text(self) -> str:
        return "; ".join(self.lines()) if not self.empty else "same stack"


def _short(value: Any) -> str:
    text = "absent" if value is None else str(value)
    return text[:12] + "…" if len(text) > 24 else text


def _newer(a: str, b: str) -> bool:
    try:
        return Version(b) > Version(a)
    except InvalidVersion:
        return b > a


def diff_stacks(a: dict[str, Any], b: dict[str, Any]) -> StackDiff:
    out = StackDiff()
    da, db_ = a.get("distributions") or {}, b.get("distributions") or {}
    out.added = {n: db_[n] for n in sorted(set(db_) - set(da))}
    out.removed = {n: da[n] for n in sorted(set(da) - set(db_))}
    for name in sorted(set(da) & set(db_)):
        if da[name] != db_[name]:
            target = out.upgraded if _newer(da[name], db_[name]) else out.downgraded
            target[name] = (da[name], db_[name])
    meta_a, meta_b = a.get("meta") or {}, b.get("meta") or {}
    for key in STACK_META:
        if meta_a.get(key) != meta_b.get(key):
            out.changed[key] = (meta_a.get(key), meta_b.get(key))
    run_a, run_b = a.get("run") or {}, b.get("run") or {}
    for key in DIFF_RUN_KEYS:
        if run_a.get(key) != run_b.get(key):
            out.changed[key] = (run_a.get(key), run_b.get(key))
    if a.get("workload_sha256") != b.get("workload_sha256"):     # a user workload's code
        out.changed["workload_sha256"] = (a.get("workload_sha256"), b.get("workload_sha256"))
    if not da and not db_ and meta_a.get("distributions_sha256") != meta_b.get("distributions_sha256"):
        out.changed["distributions_sha256"] = (meta_a.get("distributions_sha256"),
                                               meta_b.get("distributions_sha256"))
    return out


def diff_runs(engine: Engine, run_a: str, run_b: str, environments: tuple[str, str] | None = None
              ) -> tuple[dict, dict, dict[str, StackDiff | str]]:
    """Per environment of either run: its StackDiff, or "only in A"/"only in B"; with
    `environments` (ENV_A, ENV_B), ENV_A of run A against ENV_B of run B only."""
    a, b = run_row(engine, run_a), run_row(engine, run_b)
    stacks_a, stacks_b = run_stacks(engine, a["id"]), run_stacks(engine, b["id"])
    if environments is not None:
        label = " → ".join(environments)
        for stacks, name, run in ((stacks_a, environments[0], a), (stacks_b, environments[1], b)):
            if name not in stacks:
                raise UsageError(f"{run['run_id']}: no environment {name!r} in the history "
                                 f"(it has {', '.join(sorted(stacks)) or 'none'})")
        stacks_a, stacks_b = {label: stacks_a[environments[0]]}, {label: stacks_b[environments[1]]}
    out: dict[str, StackDiff | str] = {}
    for name in dict.fromkeys([*stacks_a, *stacks_b]):
        if name not in stacks_a or name not in stacks_b:
            out[name] = "only in A" if name in stacks_a else "only in B"
        else:
            out[name] = diff_stacks(stacks_a[name], stacks_b[name])
    return a, b, out


def latest_cells(engine: Engine) -> list[dict[str, Any]]:
    """The newest run's cells (the trend site's tables)."""
    r, c = tables.runs, tables.cells
    latest = _all(engine, select(r.c.id).order_by(r.c.started_at.desc(), r.c.id.desc()).limit(1))
    if not latest:
        return []
    return [dict(row._mapping) for row in _all(engine, select(c).where(
        and_(c.c.run == latest[0].id)).order_by(c.c.id))]


def bisect_conclusion(engine: Engine, pk: int | None) -> str | None:
    """What a stored bisect concluded (its message), or None."""
    b = tables.bisects
    rows = _all(engine, select(b.c.message).where(b.c.id == pk)) if pk is not None else []
    return rows[0].message if rows else None
