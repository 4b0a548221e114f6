"""The GPU check's parts, in priority order (PARTS; --minutes drops from the end): what each
runs and what it is expected to take. A part that runs the runner on one of matrices/ is sized by
the runner's own plan of it (`python -m runner plan --json`: its cells and their estimate, which
come from the history of this machine where it has one, else the runner's defaults), plus the
runner's fixed cost; the other parts by their own figures, from the H200 runs of 2026-11-27
(docs/gpu-check.md). Standard library only (check.py's reason)."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from carried_wheels import CheckError
from context import PACK_S, SETUP_S, Context, Outcome, last_line
from environment import run_logged, runner_command
from summary import run_figures

# Seconds of what no plan of the runner's says: its own start, interpreter probes, reports and
# plots around a matrix's cells; a process pairing the runner with a bare loop (import,
# calibration, 7 paired rounds); `pytest -m gpu` (the suite collected: 8-10 s); the NVML
# readings; one profiled pass.
RUN_FIXED_S = 8.0
OVERHEAD_PER_PAIR_S = 11.0
PYTEST_GPU_S = 12.0
NVML_S = 5.0
PROFILE_PROCESS_S = 16.0

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
    calibration and any build."""
    assert part.matrix is not None
    return RUN_FIXED_S + ctx.plans[part.matrix, part.only]["estimate"]["seconds"]["expected"]


def newest_run(ctx: Context, name: str) -> Path | None:
    folder = ctx.work / "runs" / name
    runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return runs[-1] if runs else None


def runner_part(name: str, matrix: str,
                only: tuple[str, ...] = ()) -> Callable[[Context], dict[str, Any]]:
    def run(ctx: Context) -> dict[str, Any]:
        path = ctx.matrix(matrix)
        run_name = tomllib.loads(path.read_text(encoding="utf-8"))["run"]["name"]
        selection = [arg for pattern in only for arg in ("--only", pattern)]
        code, tail = run_logged(ctx, name, runner_command(
            ctx, str(path), *selection, "--profile", ctx.profile, "--results-dir",
            str(ctx.work / "runs")), ctx.left_s - PACK_S)
        run_dir = newest_run(ctx, run_name)
        if run_dir is not None:
            ctx.runs[name] = run_dir
        figures = run_figures(run_dir, on_gpu=ctx.profile == "full") if run_dir else {}
        problems = figures.pop("problems", [])
        if code:
            problems.insert(0, f"runner exited {code}: {last_line(tail)}")
        return {"ok": not problems, "detail": "; ".join(problems), "figures": figures}
    return run


def runner(name: str, matrix: str, what: str, only: tuple[str, ...] = ()) -> Part:
    """A part that runs matrices/<matrix>.toml (its `only` cells) through the runner."""
    part = Part(name, what, lambda ctx: 0.0, runner_part(name, matrix, only), matrix, only,
                ((matrix, only),))
    part.estimate = lambda ctx: matrix_estimate(ctx, part)
    return part


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
    """A process per matmul cell; without the matmul part, that part's cells run first (the
    runner's estimate of them, uncalibrated)."""
    pairs = planned(ctx, MATMUL)
    alone = ctx.parts and "matmul" not in ctx.parts     # it runs the matmul cells itself
    return len(pairs) * OVERHEAD_PER_PAIR_S + (
        RUN_FIXED_S + sum(c["run_s"]["expected"] * c["runs"] for c in pairs) if alone else 0.0)


# --- pytest -m gpu, the GPU's state -----------------------------------------------------------

def pytest_part(ctx: Context) -> dict[str, Any]:
    log = ctx.out / "pytest.log"
    code, tail = run_logged(ctx, "pytest -m gpu", [str(ctx.venv_python), "-m", "pytest", "-m",
                                                   "gpu", "-p", "no:cacheprovider", "-q",
                                                   "-rA"], ctx.left_s - PACK_S, log=log)
    counts = dict((word, int(n)) for n, word in
                  re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail))
    # On a GPU no gpu test may skip for want of one (a module's own skip, Ray's, is no finding);
    # on a CPU they all do.
    no_gpu = [line for line in tail.splitlines()
              if line.startswith("SKIPPED") and re.search(r"GPU|NVML", line)]
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


# --- per-op profiles --------------------------------------------------------------------------

# Profiled passes on the GPU (docs/profiles.md): the bfloat16 products and the CNN's cells, after
# their runs; each profile must hold the device's kernels. The runner's --cell pattern of each.
PROFILED = {"matmul": "*bfloat16*", "cnn": "*"}


def profiled_query(matrix: str) -> Query:
    pattern = PROFILED[matrix]
    return matrix, () if pattern == "*" else (pattern,)


def profiles_part(ctx: Context) -> dict[str, Any]:
    runs = {name: ctx.runs[name] for name in PROFILED if name in ctx.runs}
    if not runs:
        return {"ok": False, "detail": "no matmul or cnn run to profile (their parts did not run)"}
    problems, rows = [], []
    for name, run_dir in runs.items():
        code, tail = run_logged(ctx, f"profiles ({name})", runner_command(
            ctx, "profile", str(run_dir), "--cell", PROFILED[name]), ctx.left_s - PACK_S)
        if code:
            problems.append(f"profile {run_dir.name} exited {code}: {last_line(tail)}")
        for path in sorted((run_dir / "profiles").glob("*/profile.json")):
            profile = json.loads(path.read_text(encoding="utf-8"))
            kernels_path = path.with_name("kernels.json")
            kernels = json.loads(kernels_path.read_text()) if kernels_path.is_file() else {}
            rows.append({"cell": profile.get("cell_name"), "status": profile.get("status"),
                         "device": kernels.get("device"), "source": kernels.get("source"),
                         "profiled_ms": profile.get("profiled_step_ms"),
                         "overhead": profile.get("profile_overhead"),
                         "idle_pct": kernels.get("device_idle_pct"),
                         "launches": kernels.get("launches_per_step"),
                         "top": ((kernels.get("rows") or [{}])[0]).get("name", "")[:60]})
            if profile.get("status") != "ok":
                problems.append(f"{profile.get('cell_name')}: {profile.get('error')}"[:200])
            elif ctx.profile == "full" and kernels.get("device") != "gpu":
                problems.append(f"{profile.get('cell_name')}: no GPU kernel in its profile")
    return {"ok": not problems, "detail": "; ".join(problems), "figures": {"profiles": rows}}


def profiles_estimate(ctx: Context) -> float:
    cells = [c for matrix in PROFILED for c in planned(ctx, profiled_query(matrix))]
    return len(PROFILED) * RUN_FIXED_S + len(cells) * PROFILE_PROCESS_S


PARTS = (   # in priority order: --minutes drops from the end
    runner("matmul", "matmul", "calibrated peak; 8192³ float32/bfloat16 products, torch and JAX"),
    Part("overhead", "runner ÷ bare loop of the same product, same interpreter",
         overhead_estimate, overhead_part, plans=(MATMUL,)),
    Part("pytest-gpu", "pytest -m gpu", lambda ctx: PYTEST_GPU_S, pytest_part),
    Part("nvml", "the GPU's clocks, power limit, idle power; runner doctor",
         lambda ctx: NVML_S, nvml_part),
    runner("keras-table", "keras_table", "BERT fit, Gemma generate (TTFT), size small: Keras "
           "on JAX and torch, HF", ("bert-fit-", "gemma-generate-")),
    runner("cnn", "cnn", "the small CNN's fit at batch 128: Keras (JAX, torch), torch, JAX"),
    Part("profiles", "per-op profiles of the bf16 products and the CNN cells (GPU kernels)",
         profiles_estimate, profiles_part, plans=tuple(profiled_query(m) for m in PROFILED)),
    runner("elementwise", "elementwise", "SELU on 2^24 floats, eager and compiled, torch and JAX"),
    runner("bert-predict", "keras_table", "BERT predict at batch 256, size small: Keras on JAX "
           "and torch, HF", ("bert-predict-",)),
)


def queries(parts: tuple[Part, ...]) -> list[Query]:
    """Every plan the parts read, once each."""
    return list(dict.fromkeys(query for part in parts for query in part.plans))


def choose_parts(ctx: Context, parts: tuple[Part, ...] = PARTS) -> tuple[list[Part], list[Part]]:
    """(kept, dropped): the lowest-priority parts dropped until the estimates fit the budget
    with the set-up and the packing."""
    kept = list(parts)
    dropped: list[Part] = []
    room = ctx.budget_s - SETUP_S - PACK_S
    while kept and sum(p.estimate(ctx) for p in kept) > room:
        dropped.insert(0, kept.pop())
    if not kept:
        need = parts[0].estimate(ctx) + SETUP_S + PACK_S
        raise CheckError(f"--minutes {ctx.budget_s / 60:g} is too little: the first part "
                         f"({parts[0].name}) alone needs about {need:.0f} s")
    return kept, dropped


def dry_run_part(ctx: Context, part: Part) -> Outcome:
    """The runner's own plan of the part's matrix (nothing measured, nothing written)."""
    estimate = part.estimate(ctx)
    if part.matrix is None:
        return Outcome(part.name, "planned", estimate, detail=part.what)
    plan = ctx.plans[part.matrix, part.only]
    runnable = [c for c in plan["cells"] if c["status"] == "to run"]
    calibrations = [c["name"] for c in plan["calibrations"]]
    # A benchmark of the other profile is planned "not applicable": not this check's cell.
    na = [f"{c['name']}: {c['not_applicable']}" for c in plan["cells"]
          if c["status"] == "not applicable" and "profile only" not in c["not_applicable"]]
    detail = (f"{len(runnable)} cells ({sum(c['runs'] for c in runnable)} processes)"
              + (f" and {len(calibrations)} calibrations of the peak" if calibrations else "")
              + (f"; not applicable: {'; '.join(na)}" if na else ""))
    return Outcome(part.name, "failed" if na else "planned", estimate, detail=detail,
                   figures={"planned": [c["name"] for c in runnable] + calibrations})
