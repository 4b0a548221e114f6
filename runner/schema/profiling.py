"""The matrix's [profiling] table: which cells get a profiled pass after their timed repeats, and
how it captures (runner/run/profiles.py runs it; runner/worker/profiling/ captures). Named
apart from [profiles.*], the smoke and full profiles of a run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, field_validator

from .values import Strict, shown

MAX_PROFILED_STEPS = 100
Activity = Literal["cpu", "device"]
ACTIVITIES: tuple[Activity, ...] = ("cpu", "device")
MAX_TRACE_MB = 1024.0


class ProfilingSettings(Strict):
    # Cells to profile: names, globs or ids, as --only takes them (and --profile-cells adds).
    cells: list[str] = Field(default_factory=list)
    # Steps in the trace, after `warmup` untraced ones (torch's schedule warm-up: the profiler
    # runs, its events are dropped); the cell's own warm-up (compilation) comes before both.
    steps: PositiveInt = Field(3, le=MAX_PROFILED_STEPS)
    warmup: NonNegativeInt = Field(1, le=MAX_PROFILED_STEPS)
    # What torch records: host ops ("cpu") and device kernels ("device", where a GPU is); JAX
    # and TensorFlow record both always.
    activities: list[Activity] = Field(default_factory=lambda: list(ACTIVITIES), min_length=1)
    record_shapes: bool = False       # torch: input shapes per op (larger traces)
    with_stack: bool = False          # torch: Python stacks per op (much larger traces)
    # The trace's size, uncompressed: a larger one is cut to its first steps that fit (said in
    # profile.json); kernels.json always has every step.
    max_trace_mb: PositiveFloat = Field(64.0, le=MAX_TRACE_MB)

    @field_validator("cells", mode="after")
    @classmethod
    def _cells(cls, cells: list[str]) -> list[str]:
        for pattern in cells:
            if not pattern or not pattern.isprintable():
                raise ValueError(f"profiling.cells: {shown(pattern)} is no cell name or glob")
        return cells

    def worker_settings(self) -> dict[str, Any]:
        """What the worker's profiled pass is given (CellSpec.profile_pass)."""
        return self.model_dump(exclude={"cells"})
