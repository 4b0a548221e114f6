"""The GPU check's tuned parts (docs/tuned.md): a row of matrices/tuned.toml tuned within a small
budget (`python -m runner tune --budget-minutes N`, the same for every environment of the row),
then both tiers measured by a run of the same cells. Its estimate: the tuning's budget per cell
plus the runner's plan of the defaults cells, twice (before the tuning the tuned cells are
planned "not applicable": no knobs yet; each tuned cell then takes about as long as its
defaults twin). Standard library only (check.py's reason)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from context import PACK_S, Context, last_line
from environment import run_logged, runner_command
from figures import tuning_figures
from part import RUN_FIXED_S, Part, matrix_estimate, planned, run_matrix, run_name, run_result

MATRIX = "tuned"
# Minutes of probes per cell (start-up and compilation included), the same for every cell: on
# a GPU enough for native torch's defaults, torch.compile's default and reduce-overhead modes
# (about 15 + 45 + 50 s on the H200's small CNN), and for Keras on torch with and without
# jit_compile; on a CPU (the smoke rehearsal) a probe or two.
BUDGET_MINUTES = {"full": 1.5, "smoke": 0.3}


def tuned_cells(ctx: Context, part: Part) -> list[dict[str, Any]]:
    """The defaults cells the part's row tunes (one per tuned cell of the plan)."""
    query = (MATRIX, part.only)
    tuned = {c["name"].replace("-tier=tuned", "") for c in ctx.plans[query]["cells"]
             if c["axes"].get("tier") == "tuned"}
    return [c for c in planned(ctx, query) if c["name"] in tuned]


def tuned_estimate(ctx: Context, part: Part) -> float:
    """The tuning (its budget per cell, the runner's start) and the run of both tiers."""
    budget_s = BUDGET_MINUTES[ctx.profile] * 60
    defaults_s = matrix_estimate(ctx, part) - RUN_FIXED_S
    return RUN_FIXED_S + len(tuned_cells(ctx, part)) * budget_s + RUN_FIXED_S + 2 * defaults_s


def tuned_run(name: str, only: tuple[str, ...]) -> Callable[[Context], dict[str, Any]]:
    def run(ctx: Context) -> dict[str, Any]:
        selection = [arg for pattern in only for arg in ("--only", pattern)]
        results = str(ctx.work / "runs")
        code, tail = run_logged(ctx, f"{name} (tune)", runner_command(
            ctx, "tune", str(ctx.matrix(MATRIX)), *selection, "--profile", ctx.profile,
            "--budget-minutes", f"{BUDGET_MINUTES[ctx.profile]:g}", "--results-dir", results),
            ctx.left_s - PACK_S)
        # A cell the tuning did not finish has no tuned.toml entry: its tuned cell is planned
        # not applicable, and the run measures its defaults alone; the failure is the part's.
        problem = f"tune exited {code}: {last_line(tail)}" if code else ""
        code, tail = run_matrix(ctx, name, MATRIX, only)
        result = run_result(ctx, name, MATRIX, code, tail)
        ids = {row["cell_name"]: row["cell_id"] for row in result["figures"].get("cells", [])}
        result["figures"]["tuning"] = tuning_figures(
            ctx.work / "runs" / run_name(ctx, MATRIX), ids)
        if problem:
            result["ok"] = False
            result["detail"] = "; ".join(filter(None, [problem, result["detail"]]))
        return result
    return run


def tuned(name: str, what: str, only: tuple[str, ...]) -> Part:
    """A part that tunes the `only` cells of matrices/tuned.toml, then runs both tiers."""
    part = Part(name, what, lambda ctx: 0.0, tuned_run(name, only), MATRIX, only,
                ((MATRIX, only),))
    part.estimate = lambda ctx: tuned_estimate(ctx, part)
    return part
