"""A part of the GPU check, and the parts that run one of matrices/ through the runner: what a
part is (its name, what it runs, its estimate, its run), its estimate from the runner's own plan
of its matrix (`python -m runner plan --json`: its cells and their estimate, which come from the
history of this machine where it has one, else the runner's defaults), plus the runner's fixed
cost, and the run folder it leaves. Standard library only (check.py's reason)."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context import PACK_S, Context, last_line
from environment import run_logged, runner_command
from figures import run_figures

# Seconds of what no plan of the runner's says: its own start, interpreter probes, reports and
# plots around a matrix's cells.
RUN_FIXED_S = 8.0

Query = tuple[str, tuple[str, ...]]     # (matrix, --only patterns): one `runner plan --json`


@dataclasses.dataclass
class Part:
    name: str
    what: str
    estimate: Callable[[Context], float]
    run: Callable[[Context], dict[str, Any]]
    matrix: str | None = None       # matrices/<matrix>.toml, run by the runner
    only: tuple[str, ...] = ()      # its cells (the runner's --only patterns); () all
    plans: tuple[Query, ...] = ()   # the runner's plans it reads (its matrix's, ...)


def planned(ctx: Context, query: Query) -> list[dict[str, Any]]:
    """The cells a plan runs (not those not applicable, nor the calibrations)."""
    return [c for c in ctx.plans[query]["cells"] if c["status"] == "to run"]


def matrix_estimate(ctx: Context, part: Part) -> float:
    """The runner's fixed cost plus its estimate of the part's cells × repeats, their
    calibration, their profiled passes and any build."""
    assert part.matrix is not None
    return RUN_FIXED_S + ctx.plans[part.matrix, part.only]["estimate"]["seconds"]["expected"]


def run_name(ctx: Context, matrix: str) -> str:
    return tomllib.loads(ctx.matrix(matrix).read_text(encoding="utf-8"))["run"]["name"]


def newest_run(ctx: Context, name: str) -> Path | None:
    """The newest run folder of the matrix named `name` (one with a manifest: a tuning folder
    beside the runs is no run)."""
    folder = ctx.work / "runs" / name
    runs = sorted(p for p in folder.iterdir() if (p / "manifest.json").is_file()) \
        if folder.is_dir() else []
    return runs[-1] if runs else None


def run_matrix(ctx: Context, title: str, matrix: str, only: tuple[str, ...],
               *extra: str) -> tuple[int, str]:
    """The runner on matrices/<matrix>.toml (its `only` cells) into the check's runs folder,
    stopped at the budget's end."""
    selection = [arg for pattern in only for arg in ("--only", pattern)]
    return run_logged(ctx, title, runner_command(
        ctx, str(ctx.matrix(matrix)), *selection, *extra, "--profile", ctx.profile,
        "--results-dir", str(ctx.work / "runs")), ctx.left_s - PACK_S)


def run_result(ctx: Context, name: str, matrix: str, code: int, tail: str) -> dict[str, Any]:
    """A runner part's outcome: its run folder's figures and problems, and the runner's exit."""
    run_dir = newest_run(ctx, run_name(ctx, matrix))
    if run_dir is not None:
        ctx.runs[name] = run_dir
    figures = run_figures(run_dir, on_gpu=ctx.profile == "full") if run_dir else {}
    problems = figures.pop("problems", [])
    if code:
        problems.insert(0, f"runner exited {code}: {last_line(tail)}")
    elif run_dir is None:
        problems.append("the runner left no run folder")
    return {"ok": not problems, "detail": "; ".join(problems), "figures": figures}


def runner_part(name: str, matrix: str,
                only: tuple[str, ...] = ()) -> Callable[[Context], dict[str, Any]]:
    def run(ctx: Context) -> dict[str, Any]:
        code, tail = run_matrix(ctx, name, matrix, only)
        return run_result(ctx, name, matrix, code, tail)
    return run


def runner(name: str, matrix: str, what: str, only: tuple[str, ...] = ()) -> Part:
    """A part that runs matrices/<matrix>.toml (its `only` cells) through the runner."""
    part = Part(name, what, lambda ctx: 0.0, runner_part(name, matrix, only), matrix, only,
                ((matrix, only),))
    part.estimate = lambda ctx: matrix_estimate(ctx, part)
    return part
