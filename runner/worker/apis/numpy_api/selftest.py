"""Diagnostic workload: exercises the runner's handling of every outcome without a framework.

behaviour "ok" sleeps sleep_ms per step; "fail" raises in the first step (status failed);
"crash" kills the worker process without a result (status crashed); "hang" never returns
(status timeout). Its answer is the norm of a small product of seeded arrays.

DL_BENCH_SELFTEST_SHORTCUT (an environment's `env`, a fraction in (0, 1]) makes an environment
cut corners the way a backend that silently does less would: each step sleeps that fraction of
sleep_ms, and the answer is scaled by it. The report must mark such a cell "different answer"
and never call it the best (tests/test_effects_run.py)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from ...bench import Bench
from .. import answers, seeded

BEHAVIOURS = ("ok", "fail", "crash", "hang")
SHORTCUT_ENV = "DL_BENCH_SELFTEST_SHORTCUT"


def shortcut() -> float:
    value = float(os.environ.get(SHORTCUT_ENV, "1"))
    if not 0 < value <= 1:
        raise ValueError(f"{SHORTCUT_ENV} must be a fraction in (0, 1], got {value}")
    return value


def build(spec, fw) -> Bench:
    behaviour = spec.options.get("behaviour", "ok")
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"options.behaviour must be one of {BEHAVIOURS}, got {behaviour!r}")
    share = shortcut()
    pause = spec.options.get("sleep_ms", 1.0) / 1000.0 * share
    (x,) = seeded.normal(spec.seed, (16, 16))

    def step():
        if behaviour == "fail":
            raise RuntimeError("selftest: deliberate failure")
        if behaviour == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if behaviour == "hang":
            while True:
                time.sleep(60)
        time.sleep(pause)

    return Bench(step=step, items_per_step=1, timing="time.sleep(sleep_ms) per step",
                 answer=lambda: answers.output(np.matmul(x, x.T) * share),
                 effective={"shortcut": share} if share != 1 else {})
