"""The matrix's [tuning] table (docs/tuned.md): the tuned tier's search budget per cell and the
window of its first probes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from ..errors import did_you_mean
from ..worker import catalog

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
# The batch search ([tuning] batch = "max"): doubling from the cell's batch stops at this many
# times it, where nothing ran out of memory before.
MAX_BATCH_FACTOR = 64


class TuningSettings(Strict):
    # Wall minutes of probes per cell (start-up and compilation included), the same for every
    # environment of a row; None: GPU_BUDGET_MINUTES on a GPU, CPU_BUDGET_MINUTES on a CPU.
    budget_minutes: PositiveFloat | None = Field(None, le=MAX_BUDGET_MINUTES)
    # The first rung's timed window, seconds (probes are steps = "auto" cells).
    window: PositiveFloat = Field(WINDOW_S, le=600.0)
    # The knobs searched, by name (none given: every knob an API declares that applies).
    knobs: list[str] | None = Field(None, min_length=1)
    # "max": fit, predict and run cells first search the largest batch that runs (doubling until
    # out of memory, then bisecting), keep a headroom below it, and tune the knobs there; the
    # tuned tier is then compared in items/s, never ms/step. "cell": the cell's own batch.
    batch: Literal["cell", "max"] = "cell"
    # The batch search's ceiling, as a multiple of the cell's batch.
    max_batch_factor: PositiveInt = Field(MAX_BATCH_FACTOR, le=4096)

    @field_validator("knobs", mode="after")
    @classmethod
    def _knobs(cls, knobs: list[str] | None) -> list[str] | None:
        declared = sorted({k.name for r in catalog.API_RECORDS.values()
                           for b in r.backends or (None,) for k in r.on(b).knobs})
        for name in knobs or ():
            if name not in declared:
                raise ValueError(f"no API declares a knob {name!r}"
                                 f"{did_you_mean(name, declared)} (docs/tuned.md lists them)")
        return knobs
