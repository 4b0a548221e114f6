"""An issue-ready regression report: what an upstream tracker asks of a performance regression
(PyTorch's nightly tracker files the control and treatment builds, the device, the metrics; a
Keras maintainer asks for versions, the backend and a script), made from two sides of the runs
(results/analysis/ab.py's pair table: a control and a treatment, of one run or of two).

The model holds, and nothing more: the title (the treatment's build, the row that moved most,
B ÷ A with its 95 % interval), each side's builds (a channel's build with its day, a local
build by its content hash, the framework versions its records name), what moved between the two
stacks, the per-cell figures with their intervals and detectable change, the machine (GPU,
driver, CUDA, CPU, OS, Python: never its name), whether the two sides computed the same answer,
the ops whose time moved most where both sides were profiled, and how to reproduce it (a matrix
of the two sides and the commands). The renderer (render/issue.py) writes it as issue.md and
takes out anything of the user's machine that still got in (paths, its name, its user)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...worker.catalog import AXIS_DEFAULTS
from ..data.profiles import read_profiles
from . import answers, profiles
from .ab import PairRow, PairTable, Side, machine, pair_table

TOP_OPS = 5
VERSION_KEYS = ("framework_name", "framework_version", "keras_version", "keras_backend",
                "backend_version", "jaxlib_version", "tensorflow_version", "python_version")
# What a reproduction's matrix keeps of an environment's declaration: never a variable (its
# `env` is named, its values left out: a matrix may hold a token there).
DECLARED = ("image", "api", "backend", "pins", "packages", "channel", "date", "follow")


@dataclass
class SideFacts:
    """One side as an issue names it."""

    environment: str
    run_id: str
    ran_on: str                            # the day the run started (UTC)
    versions: dict[str, str]               # framework versions its records name
    builds: list[dict[str, Any]]           # stack_builds: a channel's dated build, a local one
    lock: str | None                       # its lock's sha256, short
    declared: dict[str, Any]               # as its run's manifest declares it
    existing: bool = False                 # an existing interpreter (python = …), not built
    # each variable its `env` sets, its value as a digest: enough to tell two sides apart,
    # never the value
    variable_digests: dict[str, str] = field(default_factory=dict)

    @property
    def variables(self) -> tuple[str, ...]:
        """The names its `env` sets (never their values)."""
        return tuple(sorted(self.variable_digests))

    @property
    def build_text(self) -> str:
        """keras-nightly 3.16.0.dev2026102704 (2026-10-27), else its framework's version."""
        said = [f"{b['build']} {b['version']}" + (f" ({b['date']})" if b.get("date") else
                                                  f" (local, sha256:{str(b.get('sha256'))[:12]})")
                for b in self.builds]
        if said:
            return ", ".join(said)
        name, version = self.versions.get("framework_name"), self.versions.get("framework_version")
        return f"{name} {version}" if name and version else self.environment


@dataclass
class AnswerCheck:
    label: str
    batch_size: int | None
    verdict: str                            # same | different | not recorded


@dataclass
class IssueModel:
    title: str
    headline: PairRow | None
    control: SideFacts
    treatment: SideFacts
    table: PairTable
    machine: dict[str, str]
    answers: list[AnswerCheck]
    profile_diffs: list[tuple[PairRow, dict[str, Any]]]
    notes: list[str] = field(default_factory=list)
    matrix: dict[str, Any] = field(default_factory=dict)       # the reproduction's matrix


def facts(side: Side) -> SideFacts:
    meta: dict[str, str] = {}
    builds: list[dict[str, Any]] = []
    for record in side.records:
        found = record.get("metadata") or {}
        meta.update({k: str(found[k]) for k in VERSION_KEYS if k in found and k not in meta})
        builds = builds or list(found.get("stack_builds") or [])
    lock = next((str(m["lock_sha256"])[:12] for r in side.records
                 if (m := r.get("metadata") or {}).get("lock_sha256")), None)
    declared = (side.manifest.get("environments") or {}).get(side.environment) or {}
    env = {str(k): str(v) for k, v in (declared.get("env") or {}).items()}
    return SideFacts(side.environment, side.run_id, str(side.manifest.get("started_at") or "")[:10],
                     meta, builds, lock, {k: declared[k] for k in DECLARED if declared.get(k)},
                     bool(declared.get("python")),
                     {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in env.items()})


def variables_moved(control: SideFacts, treatment: SideFacts) -> list[str]:
    """The workers' variables that differ between the sides, by name (values left out): set on
    one side only, or to another value. Outside the stacks, yet as able to move a time (a
    planted JAX_DISABLE_JIT=1 on the treatment made the CNN 1.72× slower, 2026-11-28), so the
    issue says so beside what moved between the stacks."""
    a, b = control.variable_digests, treatment.variable_digests
    moved = [f"{name} set on B only" for name in sorted(set(b) - set(a))]
    moved += [f"{name} set on A only" for name in sorted(set(a) - set(b))]
    moved += [f"{name} set to another value on B" for name in sorted(set(a) & set(b))
              if a[name] != b[name]]
    return moved


def headline(table: PairTable) -> PairRow | None:
    """The row the title names: of those judged slower, the one surely slowest (the highest
    lower bound of its interval); else the one that moved most."""
    moved = [r for r in table.rows if r.ratio.ratio is not None]
    slower = [r for r in moved if r.verdict == "slower"]
    if slower:
        return max(slower, key=lambda r: r.ratio.low or r.ratio.ratio or 1.0)
    return max(moved, key=lambda r: abs(math.log(r.ratio.ratio or 1.0)), default=None)


def title(treatment: SideFacts, row: PairRow | None) -> str:
    """keras-nightly 3.16.0.dev2026102704: bert (fit) on keras-nightly 1.31× slower
    (1.27–1.35)."""
    if row is None or row.ratio.ratio is None:
        return f"{treatment.build_text}: no cell measured on both sides"
    ratio, low, high = row.ratio.ratio, row.ratio.low, row.ratio.high
    if ratio < 1 and low and high:                 # faster: A ÷ B, its interval turned round
        ratio, low, high = 1 / ratio, 1 / high, 1 / low
    way = f"{ratio:.2f}× slower" if row.ratio.ratio >= 1 else f"{ratio:.2f}× faster"
    interval = f" ({low:.2f}–{high:.2f})" if low is not None and high is not None else ""
    return f"{treatment.build_text}: {row.label} on {treatment.environment} {way}{interval}"


def answer_check(row: PairRow) -> AnswerCheck:
    a, b = row.summary_a, row.summary_b
    if not a.get("answer") or not b.get("answer"):
        return AnswerCheck(row.label, row.batch_size, "not recorded")
    kind = max(answers.arithmetic(a), answers.arithmetic(b), key=answers.TOLERANCES.__getitem__)
    found, compared = answers.differences(a["answer"] or {}, b["answer"] or {}, kind)
    if not compared:
        return AnswerCheck(row.label, row.batch_size, "nothing in common to compare")
    if found:
        return AnswerCheck(row.label, row.batch_size, "different: " + "; ".join(found[:3]))
    return AnswerCheck(row.label, row.batch_size,
                       f"same (within the {kind} tolerance, {answers.TOLERANCES[kind]:g})")


def profile_diffs(table: PairTable, folders: tuple[Path, Path]) -> list[tuple[PairRow, dict]]:
    """Where both sides of a row were profiled: profiles.diff's categories and top moved ops."""
    found = [{p["folder"].rsplit("/", 1)[-1]: p for p in read_profiles(folder)[0]
              if p.get("status") == "ok" and p.get("kernels")} for folder in folders]
    out = []
    for row in table.rows:
        a, b = found[0].get(row.summary_a["cell_id"]), found[1].get(row.summary_b["cell_id"])
        if a is not None and b is not None:
            out.append((row, profiles.diff(a, b, TOP_OPS)))
    return out


def reproduction(control: SideFacts, treatment: SideFacts, run_matrix: Mapping[str, Any],
                 table: PairTable) -> dict[str, Any]:
    """A matrix of the two sides (its A the control), the run's settings and the benchmarks
    of the rows compared; a channel pinned to the day each side measured."""
    names = (control.environment, treatment.environment)
    if names[0] == names[1]:
        names = (f"{names[0]}-control", f"{names[1]}-treatment")
    environments = {name: pinned_day(side) for name, side in zip(names, (control, treatment),
                                                                  strict=True)}
    run = {k: v for k, v in (run_matrix.get("run") or {}).items()
           if k in ("repeats", "warmup_steps", "steps", "min_time", "max_time", "profile")}
    run.setdefault("repeats", max((max(r.repeats) for r in table.rows), default=3))
    return {"run": {"name": "issue", **run}, "environments": environments,
            "benchmarks": [benchmark(row, list(names)) for row in table.rows]}


def benchmark(row: PairRow, environments: list[str]) -> dict[str, Any]:
    """The [[benchmarks]] entry of one row: its workload, task, batch size, every axis that is
    not its default, its options."""
    cell = row.summary_b
    out: dict[str, Any] = {"workload": cell["workload"], "task": cell["task"],
                           "batch_size": cell["batch_size"]}
    out.update({axis: cell.get(axis) for axis, default in AXIS_DEFAULTS.items()
                if cell.get(axis) is not None and cell.get(axis) != default})
    if cell.get("options"):
        out["options"] = dict(cell["options"])
    return {**out, "environments": environments}


def pinned_day(side: SideFacts) -> dict[str, Any]:
    """The side's declaration, a channel's newest build pinned to the day it measured (where
    its builds are of one day), and where it names something of this machine (an interpreter,
    a local build's path), a placeholder saying what goes there."""
    out = dict(side.declared)
    days = {b["date"] for b in side.builds if b.get("date")}
    if out.get("channel") and not out.get("date") and len(days) == 1:
        out["date"] = days.pop()       # builds of several days: the Builds table names each
    local = {b["build"]: b for b in side.builds if b.get("sha256")}
    out["pins"] = [f"{name} @ YOUR-{local[name]['origin'].split()[-1].upper()} (sha256:"
                   f"{str(local[name]['sha256'])[:12]})" if (name := p.split("@")[0].strip())
                   in local and "@" in p else p for p in out.get("pins") or []]
    if not out["pins"]:
        del out["pins"]
    if side.existing:
        out["python"] = "PATH/TO/python"
    return out


def issue_model(control: Side, treatment: Side, folders: tuple[Path, Path],
                run_matrix: Mapping[str, Any], notes: Sequence[str] = (),
                threshold: float | None = None) -> IssueModel:
    table = pair_table(control, treatment, threshold)
    sides = facts(control), facts(treatment)
    top = headline(table)
    return IssueModel(title(sides[1], top), top, sides[0], sides[1], table,
                      machine([*control.records, *treatment.records]),
                      [answer_check(row) for row in table.rows], profile_diffs(table, folders),
                      list(notes), reproduction(sides[0], sides[1], run_matrix, table))
