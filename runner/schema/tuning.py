"""The matrix's [tuning] table (docs/tuned.md): the tuned tier's search budget per cell and the
window of its first probes."""

from __future__ import annotations

from pydantic import Field, PositiveFloat

from .values import Strict

# A cell's search budget when [tuning] and --budget-minutes give none: the half hour a regular
# developer spends tuning (fchollet's rule for a fair "real-world" benchmark, tf-keras#637) on
# a GPU; on a CPU, where every probe's start and compilation dominate, a few minutes at the
# smoke profile's sizes.
GPU_BUDGET_MINUTES = 30.0
CPU_BUDGET_MINUTES = 3.0
MAX_BUDGET_MINUTES = 24 * 60.0
# The first rung's timed window per probe; each later rung's is 4 times longer.
WINDOW_S = 0.5


class TuningSettings(Strict):
    # Wall minutes of probes per cell (start-up and compilation included), the same for every
    # environment of a row; None: GPU_BUDGET_MINUTES on a GPU, CPU_BUDGET_MINUTES on a CPU.
    budget_minutes: PositiveFloat | None = Field(None, le=MAX_BUDGET_MINUTES)
    # The first rung's timed window, seconds (probes are steps = "auto" cells).
    window: PositiveFloat = Field(WINDOW_S, le=600.0)
