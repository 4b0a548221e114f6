"""The harness's own cost, inside one process: the worker's clock (StepClock and run_loop, in
blocks of the cell's size) against a bare loop of the same step timed the same way (blocks of
as many calls, one device synchronisation per block, only the last output kept), alternated
ROUNDS times for ROUND_S each. Both sides see the machine at nearly the same moment, so their
ratio isolates the clock's cost from the drift of a shared machine and from the spread between
processes.

Run by a cell with `harness_overhead` (`runner doctor --measure`, in every environment of the
matrix, through the executors), and by benchmarks/overhead.py in an environment's interpreter.
"""

from __future__ import annotations

import statistics
import time
from typing import Any
from collections.abc import Callable

from .bench import Bench, StepClock, run_loop

ROUNDS = 21
ROUND_S = 0.25


def bare_ms(step: Callable[[], Any], sync: Callable[[Any], None], block: int,
            seconds: float) -> float:
    """Median ms per call of a bare loop: blocks of `block` calls, one sync per block."""
    times: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds or not times:
        began = time.perf_counter()
        for _ in range(block - 1):
            step()
        sync(step())
        times.append((time.perf_counter() - began) / block)
    return statistics.median(times) * 1000


def clocked_ms(bench: Bench, block: int, seconds: float) -> float:
    """Median ms per call of the worker's own clock over a window of `seconds`, as the worker
    runs it (the handed block size, outputs kept only where a loss is read)."""
    clock = StepClock(warmup_calls=1, timed_calls=None, sync=bench.sync, min_time_s=seconds,
                      max_time_s=seconds, calls_per_sample=block, block_source="handed_over",
                      keep_outputs=bench.loss is not None)
    run_loop(bench, clock)
    return statistics.median(clock.timed_s) / block * 1000


def paired_rounds(bench: Bench, block: int, rounds: int = ROUNDS,
                  seconds: float = ROUND_S) -> dict[str, Any]:
    """The ratio clock ÷ bare of each round, their median and quartiles."""
    if bench.step is None or bench.drive is not None:
        return {"error": "the bench drives its own loop: no bare loop to pair it with"}
    ratios, clocked_all, bare_all = [], [], []
    for _ in range(rounds):
        clocked = clocked_ms(bench, block, seconds)
        bare = bare_ms(bench.step, bench.sync, block, seconds)
        ratios.append(clocked / bare)
        clocked_all.append(clocked)
        bare_all.append(bare)
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    # The medians of each side too: a cell's record (another process) is compared with bare_ms.
    return {"ratio": statistics.median(ratios), "quartiles": [quartiles[0], quartiles[2]],
            "clocked_ms": statistics.median(clocked_all), "bare_ms": statistics.median(bare_all),
            "rounds": rounds, "round_s": seconds, "calls_per_sample": block}
