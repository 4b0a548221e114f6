"""Diagnostic workload: exercises the runner's handling of every outcome without a framework.

behaviour "ok" sleeps sleep_ms per step; "fail" raises in the first step (status failed);
"crash" kills the worker process without a result (status crashed); "hang" never returns
(status timeout)."""

from __future__ import annotations

import os
import signal
import time

from ...bench import Bench

BEHAVIOURS = ("ok", "fail", "crash", "hang")


def build(spec, fw) -> Bench:
    behaviour = spec.options.get("behaviour", "ok")
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"options.behaviour must be one of {BEHAVIOURS}, got {behaviour!r}")
    pause = spec.options.get("sleep_ms", 1.0) / 1000.0

    def step():
        if behaviour == "fail":
            raise RuntimeError("selftest: deliberate failure")
        if behaviour == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if behaviour == "hang":
            while True:
                time.sleep(60)
        time.sleep(pause)

    return Bench(step=step, items_per_step=1, timing="time.sleep(sleep_ms) per step")
