"""`runner bisect RUN_GOOD RUN_BAD --cell ID`: which changed distribution moved the cell.

The two runs' records name the distributions installed in the cell's environment (name →
version). Every distribution that was added, removed, upgraded or downgraded between them is a
candidate. Each step builds an intermediate stack: the good stack with a set of candidates taken
from the bad one. uv resolves those exact pins (with their dependencies) and hash-locks them; a
set that cannot be resolved is reported and skipped (a release a pinned nightly build replaces,
keras beside keras-nightly, is left out). The stack is installed as a fresh virtual environment
(cached by its lock's hash) and the cell is measured there by the runner's own pipeline, with the
same repeats as the endpoints, then judged against the good stack by `compare`'s statistics.

Halving: with C the candidates not yet cleared and T those already taken, one half H of C is
taken (T + H). If the cell moves, the culprit is in H; otherwise it is in the other half, which
is taken from then on. When no split of C can be resolved, C is a group that only moves
together, and it is named as one. Every step and its measurement is written to the history."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from rich.console import Console
from sqlalchemy import insert, update

from ..environments import channels
from ..environments.venvs import ENV_ROOT, LocalEnv, find_uv, installer_command, venv_command
from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, user_text
from ..paths import RESULTS_DIR
from ..results.data.store import Store, open_run
from ..results.data.types import Record
from ..schema.matrix import load as load_matrix, read_toml
from ..history import measures, tables
from ..history.ingest import now
from ..history.queries import StackDiff, diff_stacks
from ..timestamps import folder_stamp


@dataclass
class Step:
    number: int
    taken: list[str]                       # distributions taken from the bad stack
    resolved: bool = False
    lock_sha256: str | None = None
    error: str | None = None
    records: list[Record] = field(default_factory=list)
    verdict: str | None = None             # good | bad | unresolvable | failed
    ratio: float | None = None
    median_ms: float | None = None        # the bad side's time in compare (TIME_KEY since issue 49)


class Bisect:
    """`bisect` (run()): which changed distribution between the good and the bad run moved
    `cell`; `repeats` per measured stack (None: the bad run's, at least 3)."""

    def __init__(self, engine, good_dir: Path, bad_dir: Path, cell: str,
                 repeats: int | None, work: Path | None, find_links: Sequence[Path],
                 console: Console, good_cell: str | None = None):
        if repeats is not None and repeats < 2:
            raise UsageError("--repeats must be ≥ 2 (compare needs two repeats per side)")
        self.engine, self.console = engine, console
        self.find_links = [str(p) for p in find_links]
        self.good_dir, self.bad_dir = good_dir, bad_dir
        # A cell id may differ between the runs (it hashes where the environment came from): the
        # id or name finds it in the bad run, its name (or --good-cell's) in the good one.
        bad_records = self._cell_records(bad_dir, cell)
        self.environment = bad_records[0]["environment"]
        self.cell_name = bad_records[0]["cell_name"]
        good_records = self._cell_records(good_dir, good_cell or self.cell_name)
        self.good, self.bad = (self._distributions(r, d) for r, d in
                               ((good_records, good_dir), (bad_records, bad_dir)))
        self.diff: StackDiff = diff_stacks({"distributions": self.good}, {"distributions": self.bad})
        self.changed = self.diff.distributions()
        if not self.changed:
            raise UsageError(f"{self.environment}: the two runs installed the same distributions; "
                             "nothing to bisect (runner compare shows what else differs)")
        meta = (bad_records[0].get("metadata") or {})
        self.python = ".".join(str(meta.get("python_version") or "3.11").split(".")[:2])
        self.repeats = repeats or max(3, max(r["repeat"] for r in bad_records))
        stamp = folder_stamp()
        self.work = work or RESULTS_DIR / "bisect" / f"{bad_records[0]['cell_id']}-{stamp}"
        self.work.mkdir(parents=True, exist_ok=True)
        self.steps: list[Step] = []
        self.pk: int | None = None
        self.direction: str | None = None
        self.good_step: Step | None = None
        self.good_environment = good_records[0]["environment"]

    @staticmethod
    def _cell_records(run_dir: Path, cell: str) -> list[Record]:
        store, _ = open_run(run_dir)
        ok = [r for r in store.records()
              if cell in (r["cell_id"], r["cell_name"]) and r["status"] == "ok"]
        if not ok:
            raise UsageError(f"{run_dir}: no ok record of cell {cell!r} (runner report "
                             f"{run_dir} lists its cells)")
        return ok

    @staticmethod
    def _distributions(records: Sequence[Mapping[str, Any]], run_dir: Path) -> dict[str, str]:
        from ..worker.distributions import canonical

        found = next((r["distributions"] for r in records if r.get("distributions")), None)
        if not found:
            raise UsageError(f"{run_dir}: its records do not list the installed distributions "
                             "(recorded since the runner's distributions field; run it again)")
        return {canonical(n): str(v) for n, v in found.items()}

    # -- one intermediate stack -------------------------------------------------------------
    def pins(self, taken: list[str]) -> dict[str, str]:
        out = dict(self.good)
        for name in taken:
            if self.bad.get(name) is None:
                out.pop(name, None)
            else:
                out[name] = self.bad[name]
        return dict(sorted(out.items()))

    def lock(self, step: Step) -> Path | None:
        """uv's hash-locked resolution of the step's pins, or None (step.error says why)."""
        folder = self.work / f"step{step.number:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        wanted = folder / "requirements.in"
        wanted.write_text("".join(f"{n}=={v}\n" for n, v in self.pins(step.taken).items()))
        lock = folder / "requirements.lock"
        uv = find_uv()
        if uv is None:
            raise UsageError("bisect needs uv (pip install uv) to resolve the stacks")
        command = [uv, "pip", "compile", str(wanted), "--generate-hashes", "--quiet",
                   "--python-version", self.python, "--output-file", str(lock)]
        for link in self.find_links:
            command += ["--find-links", link]
        command += channels.excluding(self.pins(step.taken), folder)   # releases a nightly replaces
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
            step.error = " ".join(ln.strip() for ln in lines[-3:])[:400] or f"uv exited {done.returncode}"
            return None
        step.resolved = True
        step.lock_sha256 = hashlib.sha256(lock.read_bytes()).hexdigest()
        return lock

    def build(self, lock: Path, sha: str) -> Path:
        env = LocalEnv("bisect", "cpu", lock, ENV_ROOT / f"bisect-py{self.python.replace('.', '')}"
                       f"-{sha[:12]}", sha)
        if (env.path / ".complete").is_file() and env.python.exists():
            return env.python
        if env.path.exists():
            shutil.rmtree(env.path)
        env.path.parent.mkdir(parents=True, exist_ok=True)
        for command in (venv_command(env), installer_command(env)):
            if self.find_links and command[0].endswith("uv") and "install" in command:
                command = command + [a for link in self.find_links for a in ("--find-links", link)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"installing the stack failed: {done.stderr.strip()[-300:]}")
        (env.path / ".complete").write_text(sha + "\n")
        return env.python

    def matrix_for(self, python: Path, step: Step) -> Path:
        """The bad run's matrix (its profile already applied), the cell's environment pointed at
        the step's interpreter, every other environment left out."""
        data = read_toml(self.bad_dir / "matrix.toml")
        env = {k: v for k, v in data["environments"][self.environment].items()   # the step's
               if k not in ("image", "pins", "packages", "channel", "date", "follow")}  # stack
        env["python"] = str(python)
        data["environments"] = {self.environment: env}
        data.get("report", {}).pop("baseline_environment", None)   # perhaps one left out
        run = data.setdefault("run", {})
        run.update(name=f"bisect-step{step.number:02d}", repeats=self.repeats, calibrate=False,
                   executor="local")
        for overrides in (data.get("profiles") or {}).values():
            for key in ("repeats", "calibrate", "executor"):
                overrides.pop(key, None)
        benches = []
        for bench in data.get("benchmarks", []):
            names = bench.get("environments", ["*"])
            if "*" in names or self.environment in names:
                bench = {**bench, "environments": [self.environment]}
                bench.pop("repeats", None)
                benches.append(bench)
        data["benchmarks"] = benches
        path = self.work / f"step{step.number:02d}" / "matrix.toml"
        path.write_text(tomli_w.dumps(data))
        return path

    def measure(self, step: Step) -> None:
        from ..run import pipeline
        from ..run.setup import choose_setup

        lock = self.lock(step)
        if lock is None:
            step.verdict = "unresolvable"
            return
        try:
            python = self.build(lock, step.lock_sha256 or "")
        except RuntimeError as exc:
            step.verdict, step.error = "failed", str(exc)
            return
        path = self.matrix_for(python, step)
        matrix = load_matrix(path)
        matrix.cells = [c for c in matrix.cells if c.name == self.cell_name]
        if not matrix.cells:
            step.verdict, step.error = "failed", f"{self.cell_name} is not a cell of {path}"
            return
        # The good end's block for every later step (a slower stack calibrates a shorter one).
        block = self.good_step.records[0].get("calls_per_sample") if self.good_step else None
        opts = pipeline.Options(matrix_path=path, results_dir=self.work / "runs",
                                executor="local", history=False, calls_per_sample=block)
        quiet = Console(file=io.StringIO(), width=200)
        setup = choose_setup(matrix, "local")
        try:
            pipeline.execute(pipeline.CELLS,
                             pipeline.RunState(opts, quiet, pipeline.Decisions(matrix, setup)))
        finally:
            setup.close()
        folder = Store.latest(matrix.spec.run.name, self.work / "runs")
        step.records = [r for r in Store(folder).records()
                        if r["cell_name"] == self.cell_name and r["status"] == "ok"]
        if len(step.records) < self.repeats:
            step.verdict = "failed"
            step.error = f"{self.repeats - len(step.records)} repeats did not finish ok ({folder})"

    def judge(self, step: Step) -> None:
        """bad when the step moved the cell as the bad stack did, good when it did not."""
        if step.verdict is not None:
            return
        assert self.good_step is not None       # run() measures the good end first
        verdict = measures.compare_repeats(self.good_step.records, step.records)
        step.ratio = verdict.ratio
        step.median_ms = verdict.time_b_ms
        step.verdict = "bad" if verdict.verdict == self.direction else "good"

    # -- the history --------------------------------------------------------------------------
    def start_record(self) -> None:
        with self.engine.begin() as conn:
            self.pk = conn.execute(insert(tables.bisects).values(
                cell_name=self.cell_name, environment_name=self.environment,
                run_good=str(self.good_dir), run_bad=str(self.bad_dir), started_at=now(),
                status="running", changed={n: list(v) for n, v in self.changed.items()},
            )).inserted_primary_key[0]

    def record_step(self, step: Step) -> None:
        medians = [measures.repeat_median(r) for r in step.records]
        with self.engine.begin() as conn:
            conn.execute(insert(tables.bisect_steps).values(
                bisect=self.pk, step=step.number, taken=step.taken, lock_sha256=step.lock_sha256,
                resolved=step.resolved, error=step.error, repeat_medians_ms=medians,
                median_ms=step.median_ms, ratio_to_good=step.ratio, verdict=step.verdict))

    def finish_record(self, status: str, culprit: list[str] | None, message: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(tables.bisects).where(tables.bisects.c.id == self.pk).values(
                finished_at=now(), status=status, culprit=culprit, message=message))

    # -- the search ---------------------------------------------------------------------------
    def step(self, taken: list[str]) -> Step:
        step = Step(len(self.steps), sorted(taken))
        self.steps.append(step)
        self.measure(step)
        if self.good_step is not None and self.direction is not None:
            self.judge(step)
        self.record_step(step)
        self.show(step)
        return step

    def show(self, step: Step) -> None:
        shown = ", ".join(self.change_text(n) for n in step.taken) or "none (the good stack)"
        medians = [measures.repeat_median(r) for r in step.records]
        figures = f"repeat medians {', '.join(f'{m:.4g}' for m in medians)} ms" + (
            f" → {step.ratio:.3f}× the good stack: [bold]{step.verdict}[/]"
            if step.ratio is not None else "")
        if step.verdict in ("unresolvable", "failed"):
            figures = f"[yellow]{step.verdict}[/] ({user_text(step.error or '')})"
        self.console.print(f"step {step.number}: take {user_text(shown)}: {figures}",
                           soft_wrap=True)

    def change_text(self, name: str) -> str:
        old, new = self.changed[name]
        return f"{name} {old or 'absent'} → {new or 'absent'}"

    def run(self) -> int:
        self.start_record()
        names = list(self.changed)
        self.console.print(f"bisect {user_text(self.cell_name)} ({self.environment}): "
                           f"{len(names)} distributions changed: "
                           f"{user_text('; '.join(self.change_text(n) for n in names))}",
                           soft_wrap=True)
        good = self.step([])
        self.good_step = None if good.verdict else good      # measure() hands on its block
        bad = self.step(names) if self.good_step else good
        if good.verdict or bad.verdict:
            return self.give_up("failed", "an end point could not be measured: "
                                + (good.error or bad.error or ""))
        verdict = measures.compare_repeats(good.records, bad.records)
        bad.ratio, bad.median_ms = verdict.ratio, verdict.time_b_ms
        if verdict.verdict not in (measures.SLOWER, measures.FASTER):
            return self.give_up("inconclusive", f"the bad stack measures {verdict.verdict} as the "
                                f"good one here ({verdict.ratio:.3f}×; {verdict.reason}): "
                                "nothing to bisect on this machine")
        self.direction = verdict.verdict
        self.console.print(f"the bad stack is {verdict.ratio:.3f}× the good one ("
                           f"{verdict.verdict}, p={verdict.p_value:.2g})", soft_wrap=True)
        taken: list[str] = []
        candidates = names
        while len(candidates) > 1:
            moved = self.split(taken, candidates)
            if moved is None:
                break
            taken, candidates = moved
        culprit = candidates
        what = "; ".join(self.change_text(n) for n in culprit)
        kind = "distribution" if len(culprit) == 1 else "group that only moves together"
        message = f"named the {kind}: {what}"
        self.finish_record("named", culprit, message)
        self.console.print(f"[bold]{user_text(message)}[/]", soft_wrap=True)
        return EXIT_OK

    def split(self, taken: list[str], candidates: list[str]) -> tuple[list[str], list[str]] | None:
        """One halving: (taken, candidates) after it, or None when no split resolves."""
        half = len(candidates) // 2
        tries = [candidates[:half], candidates[half:]]
        tries += [[n] for n in candidates] + [[m for m in candidates if m != n] for n in candidates]
        seen = set()
        for part in tries:
            key = tuple(sorted(part))
            if key in seen or not part or len(part) == len(candidates):
                continue
            seen.add(key)
            step = self.step(taken + part)
            rest = [n for n in candidates if n not in part]
            if step.verdict == "bad":
                return taken, part
            if step.verdict == "good":
                return taken + part, rest
            if step.verdict == "failed":
                return None
        return None

    def give_up(self, status: str, message: str) -> int:
        self.finish_record(status, None, message)
        self.console.print(f"[red]{user_text(message)}[/]", soft_wrap=True)
        return EXIT_FAILED_CELLS

