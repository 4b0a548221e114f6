"""Diagnostic workload: exercises the runner's handling of every outcome without a framework.

behaviour "ok" sleeps sleep_ms per step; "fail" raises in the first step (status failed);
"crash" kills the worker process without a result (status crashed); "hang" never returns
(status timeout); "orphan" first leaves a process behind that escapes the worker's session and
parentage (setsid and a double fork; `marker` in its command line), then steps as "ok"; "flood"
first prints flood_mb megabytes, then steps as "ok". Its answer is the norm of a small product of
seeded arrays.

Its knobs (the numpy record's, catalog/apis.py) give the tuned tier's search a known cost model:
selftest_speed scales each step's sleep, selftest_greedy quarters it but runs out of memory above
batch 2, selftest_shortcut cuts it to a tenth and scales the answer as a shortcut does. With
`memory_batches` (the largest batch that does not run out of memory) a step is the whole batch
at the same cost: the batch search's known model.

DL_BENCH_SELFTEST_SHORTCUT (an environment's `env`, a fraction in (0, 1]) makes an environment
cut corners the way a backend that silently does less would: each step sleeps that fraction of
sleep_ms, and the answer is scaled by it. The report must mark such a cell "different answer"
and never call it the best (tests/results/render/test_effects_run.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np

from ... import tuning
from ...protocol import CellSpec
from ...bench import Bench
from .. import answers, seeded
from . import Framework

BEHAVIOURS = ("ok", "fail", "crash", "hang", "orphan", "flood")
SHORTCUT_ENV = "DL_BENCH_SELFTEST_SHORTCUT"
# The escaped process: started in a new session by a child that exits at once, so its parent
# is gone and it belongs to no group of the worker's; it ignores SIGTERM and sleeps.
ORPHAN = ("import signal, subprocess, sys; subprocess.Popen([sys.executable, '-c', "
          "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)',"
          " sys.argv[1]], start_new_session=True, stdout=subprocess.DEVNULL, "
          "stderr=subprocess.DEVNULL)")


def leave_an_orphan(marker: str) -> None:
    subprocess.run([sys.executable, "-c", ORPHAN, marker], start_new_session=True, check=True)


def flood(megabytes: float) -> None:
    line = b"selftest flood " + b"x" * 1008 + b"\n"           # 1 KiB
    for _ in range(int(megabytes * 1024)):
        sys.stdout.buffer.write(line)
    sys.stdout.flush()


def shortcut() -> float:
    value = float(os.environ.get(SHORTCUT_ENV, "1"))
    if not 0 < value <= 1:
        raise ValueError(f"{SHORTCUT_ENV} must be a fraction in (0, 1], got {value}")
    return value


def build(spec: CellSpec, fw: Framework) -> Bench:
    behaviour = spec.options.get("behaviour", "ok")
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"options.behaviour must be one of {BEHAVIOURS}, got {behaviour!r}")
    share = shortcut() * (0.1 if tuning.knob(spec, "selftest_shortcut", False) else 1.0)
    greedy = bool(tuning.knob(spec, "selftest_greedy", False))
    if greedy and spec.batch_size > 2:
        raise MemoryError("selftest: out of memory (selftest_greedy above batch 2)")
    memory = spec.options.get("memory_batches")
    if memory is not None and spec.batch_size > memory:
        raise MemoryError(f"selftest: out of memory (memory_batches = {memory})")
    pause = spec.options.get("sleep_ms", 1.0) / 1000.0 * share * \
        float(tuning.knob(spec, "selftest_speed", 1.0)) * (0.25 if greedy else 1.0)
    (x,) = seeded.normal(spec.seed, (16, 16))
    if behaviour == "orphan":
        leave_an_orphan(spec.options.get("marker", "dl-bench-selftest-orphan"))
    if behaviour == "flood":
        flood(spec.options.get("flood_mb", 1.0))

    def step():
        if behaviour == "fail":
            raise RuntimeError("selftest: deliberate failure")
        if behaviour == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if behaviour == "hang":
            while True:
                time.sleep(60)
        time.sleep(pause)

    # Modelling memory, a step is the whole batch at the same cost: items/s grows with it.
    items = spec.batch_size if memory is not None else 1
    return Bench(step=step, items_per_step=items, timing="time.sleep(sleep_ms) per step",
                 answer=lambda: answers.output(np.matmul(x, x.T) * share),
                 effective={"shortcut": share} if share != 1 else {})
