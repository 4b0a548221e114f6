"""The GPU check's parts that are not a matrix of the runner's: the runner's own cost on the GPU
(runner ÷ a bare loop of the same product, benchmarks/overhead.py), `pytest -m gpu`, and the GPU's
state through NVML and `runner doctor`; each sized by the check's own figures, from the H200 runs
of 2026-11-27 (docs/gpu-check.md). Standard library only (check.py's reason)."""

from __future__ import annotations

import json
import re
from typing import Any

from context import PACK_S, Context, last_line
from environment import run_logged, runner_command
from part import RUN_FIXED_S, Query, newest_run, planned

# Seconds of a process pairing the runner with a bare loop (import, calibration, 7 paired
# rounds); `pytest -m gpu` (the suite collected: 8-10 s); the NVML readings.
OVERHEAD_PER_PAIR_S = 11.0
PYTEST_GPU_S = 12.0
NVML_S = 5.0


# --- the overhead: runner ÷ a bare loop -------------------------------------------------------

MATMUL: Query = ("matmul", ())


def overhead_part(ctx: Context) -> dict[str, Any]:
    """The matmul part's cells, each paired with a bare loop in one process of the same
    interpreter; run without the matmul part (--parts), it runs those cells itself, uncalibrated."""
    run_dir = ctx.runs.get("matmul")
    if run_dir is None:
        source = ctx.matrix("matmul")
        uncalibrated = source.with_name("matmul-uncalibrated.toml")
        uncalibrated.write_text(source.read_text(encoding="utf-8").replace(
            "calibrate = true", "calibrate = false"), encoding="utf-8")
        run_logged(ctx, "overhead (the matmul cells)", runner_command(
            ctx, str(uncalibrated), "--profile", ctx.profile, "--results-dir",
            str(ctx.work / "runs")), ctx.left_s - PACK_S)
        run_dir = newest_run(ctx, "gpu-check-matmul")
        if run_dir is None:
            return {"ok": False, "detail": "the matmul cells to pair with did not run"}
    result = ctx.work / "overhead.json"
    code, tail = run_logged(ctx, "overhead", [str(ctx.venv_python), "benchmarks/overhead.py",
                                              "--from-run", str(run_dir), "--rounds", "7",
                                              "--python", str(ctx.venv_python),
                                              "--json", str(result)], ctx.left_s - PACK_S)
    if code or not result.is_file():
        return {"ok": False, "detail": f"overhead.py exited {code}: {last_line(tail)}"}
    pairs = json.loads(result.read_text(encoding="utf-8"))
    return {"ok": True, "figures": {"pairs": pairs}}


def overhead_estimate(ctx: Context) -> float:
    """A process per matmul cell; without the matmul part's run (not chosen, or not run),
    that part's cells run first (the runner's estimate of them, uncalibrated)."""
    pairs = planned(ctx, MATMUL)
    alone = "matmul" not in ctx.runs and "matmul" not in ctx.kept   # it runs the cells itself
    return len(pairs) * OVERHEAD_PER_PAIR_S + (
        RUN_FIXED_S + sum(c["run_s"]["expected"] * c["runs"] for c in pairs) if alone else 0.0)


# --- pytest -m gpu, the GPU's state -----------------------------------------------------------

NO_GPU_SKIP = re.compile(r"NVML found none|needs an NVIDIA GPU|no (NVIDIA )?GPU")


def pytest_part(ctx: Context) -> dict[str, Any]:
    log = ctx.out / "pytest.log"
    code, tail = run_logged(ctx, "pytest -m gpu", [str(ctx.venv_python), "-m", "pytest", "-m",
                                                   "gpu", "-p", "no:cacheprovider", "-q",
                                                   "-rA"], ctx.left_s - PACK_S, log=log)
    counts = dict((word, int(n)) for n, word in
                  re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail))
    # On a GPU no gpu test may skip for want of one (a module's own skip, Ray's, is no finding,
    # nor a two-GPU test's on a one-GPU machine: "NVML found fewer"); on a CPU they all do.
    no_gpu = [line for line in tail.splitlines()
              if line.startswith("SKIPPED") and NO_GPU_SKIP.search(line)]
    ok = code == 0 and (counts.get("passed", 0) > 0 and not no_gpu
                        if ctx.profile == "full" else True)
    detail = "" if ok else "; ".join([f"pytest exited {code}: {last_line(tail)}", *no_gpu])
    return {"ok": ok, "detail": detail, "figures": counts}


NVML_STATE = """
import json
from runner.machine import gpustate
from runner.worker.monitor import Nvml
gpu = gpustate.open_gpu()
if gpu is None:
    print(json.dumps({"gpu": None}))
else:
    state = gpustate.gpu_state(gpu)
    state["metadata"] = gpu.metadata()
    state["idle_power"] = gpu.idle()
    print(json.dumps({"gpu": state}, default=str))
"""


def nvml_part(ctx: Context) -> dict[str, Any]:
    code, tail = run_logged(ctx, "nvml", runner_command(ctx, "doctor"),
                            min(60.0, ctx.left_s - PACK_S))
    state_code, state = run_logged(ctx, "nvml state", [str(ctx.venv_python), "-c", NVML_STATE],
                                   min(60.0, ctx.left_s - PACK_S))
    try:
        gpu = json.loads(state.strip().splitlines()[-1])["gpu"]
    except (ValueError, IndexError, KeyError):
        return {"ok": False, "detail": f"the NVML state was not read: {last_line(state)}"}
    if gpu is None:
        return {"ok": ctx.profile == "smoke", "detail": "NVML sees no GPU",
                "figures": {"doctor_exit": code}}
    return {"ok": state_code == 0, "figures": {"gpu": gpu, "doctor_exit": code}}
