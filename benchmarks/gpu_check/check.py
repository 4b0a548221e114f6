"""The GPU check: everything a lent GPU machine should run, in one command of a few minutes.

    benchmarks/gpu_check/run.sh OUT [--minutes N] [--dry-run] [--python PATH] [--wheels DIR]
                                    [--work DIR] [--profile full|smoke]
    python3 benchmarks/gpu_check/check.py fetch-wheels [--wheels DIR]

It makes a virtual environment over the machine's own interpreter (which holds CUDA torch and
JAX), installs the wheels the repository carries into it without any network (Keras, keras-hub
and the runner's own dependencies the machine lacks, each checked against its hash), then runs
its parts in priority order within the budget: the runner's matrices under matrices/, the
overhead benchmark (runner ÷ a bare loop), `pytest -m gpu` and the GPU's NVML state. OUT
receives at most 8 files (the run folders as one archive, the pytest log, the whole log, the
summary as text and JSON), each under 16 MiB; the summary is also printed, one screen.

--minutes N (default 8) drops the lowest-priority parts (the end of PARTS) until the estimate
fits; a part that would overrun what is left at its turn is skipped, and a running part is
stopped at the budget's end, so the check ends in time whatever the machine does.
--dry-run plans everything (the environment, the carried wheels, every matrix through the
runner's own `plan`, the budget, the output limits) and runs nothing on a device.
--profile smoke runs the same parts at tiny sizes: a rehearsal of the whole path on a CPU.

Standard library only: it starts under the machine's interpreter, which lacks the runner's
dependencies until the check's environment holds them; the runner's code runs in subprocesses
of that environment's interpreter.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from carried_wheels import (MACHINE_PYTHON_TAG, WHEEL_LIST, CheckError, Wheel, check_wheel_folder,
                            check_wheel_list, fetch_wheels, mib, python_tags, read_wheel_list,
                            unpack_wheel)
from out_folder import OUT_FILES, check_out_folder, pack_runs, atomic_write

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MATRICES = HERE / "matrices"
DEFAULT_WHEELS = REPO / ".whl"          # git-ignored; the device tool carries it by name
DEFAULT_WORK = Path("/tmp/gpu-check")
# The interpreter path the matrices name; replaced by the check's environment's own.
MATRIX_PYTHON = "/tmp/gpu-check/venv/bin/python"
DEFAULT_MINUTES = 8.0

# --- estimates (seconds), from the H200 runs of 2026-11-27 (docs/gpu-check.md has each part's
# time); the summary prints each part's time beside its estimate so that these can be re-sized.
PROCESS_S = {"torch": 11.0, "jax": 10.0, "keras-jax": 17.0, "keras-torch": 18.0, "hf": 14.0}
WORKLOAD_S = {"matmul": 0.0, "elementwise": 0.0, "cnn": 4.0, "bert": 9.0, "gemma": 12.0}
CALIBRATION_EXTRA_S = 30.0              # three sizes, two passes, >= 3 s each (H200: 38-42 s)
TORCH_COMPILE_S = 14.0                  # torch.compile's process: 26 s for SELU on the H200
RUN_FIXED_S = 8.0                       # the runner's start, interpreter probes, reports, plots
SETUP_S = 10.0                          # the environment and the wheels
PACK_S = 10.0                           # the archive and the summary
OVERHEAD_PER_PAIR_S = 11.0              # one process: import, calibration, 7 paired rounds
PYTEST_GPU_S = 12.0                     # the suite collected, the gpu tests: 8-10 s
NVML_S = 5.0
STOP_GRACE_S = 15.0                     # SIGTERM, then SIGKILL: a run finalises its reports


# --- the plan ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Context:
    out: Path
    work: Path
    python: str                 # the machine's interpreter
    wheels: Path
    wheel_list: Path
    profile: str
    dry_run: bool
    budget_s: float
    parts: tuple[str, ...] = ()     # --parts: these alone (a rerun); () all
    started: float = dataclasses.field(default_factory=time.monotonic)
    venv_python: Path | None = None
    log: Any = None             # OUT/check.log, open for appending
    cells: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    runs: dict[str, Path] = dataclasses.field(default_factory=dict)   # part -> run folder

    @property
    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)


@dataclasses.dataclass
class Part:
    name: str
    what: str
    estimate: Callable[[Context], float]
    run: Callable[[Context], dict[str, Any]]
    matrix: str | None = None       # matrices/<matrix>.toml, run by the runner
    only: tuple[str, ...] = ()      # its cells (the runner's --only patterns); () all


@dataclasses.dataclass
class Outcome:
    name: str
    status: str                     # ok | failed | skipped | dropped | planned
    estimate_s: float
    elapsed_s: float | None = None
    detail: str = ""
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)


def process_s(cell: dict[str, Any]) -> float:
    key = f"keras-{cell['backend']}" if cell["api"] == "keras" else cell["api"]
    compiled = TORCH_COMPILE_S if cell["api"] in ("torch", "hf") and cell["jit"] not in (
        False, "auto") else 0.0
    return PROCESS_S.get(key, 15.0) + WORKLOAD_S.get(cell["workload"], 5.0) + compiled


def selected(cells: list[dict[str, Any]], only: tuple[str, ...]) -> list[dict[str, Any]]:
    """The cells `--only` patterns select, as the runner matches them (a substring or a glob
    of the name); every cell without patterns."""
    return [c for c in cells if not only or any(p in c["name"] or fnmatch.fnmatch(c["name"], p)
                                                for p in only)]


def part_cells(ctx: Context, part: Part) -> list[dict[str, Any]]:
    return selected(ctx.cells.get(part.matrix or "", []), part.only)


def matrix_estimate(ctx: Context, part: Part) -> float:
    """The runner's fixed cost plus one process per cell × repeat and per calibration cell."""
    cells = part_cells(ctx, part)
    total = RUN_FIXED_S
    for cell in cells:
        if cell["not_applicable"]:
            continue
        extra = CALIBRATION_EXTRA_S if cell["calibration"] else 0.0
        total += cell["repeats"] * (process_s(cell) + extra)
    return total


PLAN_CELLS = """
import json, sys
from runner.schema import matrix as m
loaded = m.load(sys.argv[1], profile=sys.argv[2])
def row(cell, calibration):
    return {"name": cell.name, "api": cell.api, "backend": cell.backend,
            "workload": cell.workload, "task": cell.task, "repeats": cell.repeats,
            "jit": cell.axes["jit"],
            "not_applicable": cell.not_applicable, "calibration": calibration}
print(json.dumps([row(c, False) for c in loaded.cells] + [row(c, True) for c in loaded.calibration]))
"""


def plan_matrix(ctx: Context, matrix: str) -> Path:
    """matrices/<matrix>.toml, with the check's interpreter in it, in the work folder; its
    cells (for the estimate) read by the runner's own loader."""
    text = (MATRICES / f"{matrix}.toml").read_text(encoding="utf-8")
    path = ctx.work / "matrices" / f"{matrix}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(MATRIX_PYTHON, str(ctx.venv_python)), encoding="utf-8")
    done = subprocess.run([str(ctx.venv_python), "-c", PLAN_CELLS, str(path), ctx.profile],
                          cwd=REPO, capture_output=True, text=True, env=child_env())
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CheckError(f"matrices/{matrix}.toml cannot be planned: {last}")
    ctx.cells[matrix] = json.loads(done.stdout)
    return path


# --- running a part ---------------------------------------------------------------------------

def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120", **extra}
    env.pop("PYTHONPATH", None)         # the runner puts itself on its workers' path
    return env


def run_logged(ctx: Context, title: str, command: list[str], timeout: float,
               log: Path | None = None, **env: str) -> tuple[int, str]:
    """Run `command` from the repository, its output into check.log (and `log`), stopped with
    SIGTERM (then SIGKILL) after `timeout` seconds: (exit code, its last 4 000 characters)."""
    ctx.log.write(f"\n===== {title}: {' '.join(command)}\n")
    ctx.log.flush()
    sink = log.open("w", encoding="utf-8") if log else None
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace",
                               env=child_env(**env), start_new_session=True)
    assert process.stdout is not None
    tail: list[str] = []
    deadline = time.monotonic() + max(timeout, 1.0)
    timer = _Stopper(process, deadline)
    try:
        for line in process.stdout:
            ctx.log.write(line)
            if sink:
                sink.write(line)
            tail.append(line)
            if len(tail) > 200:
                del tail[:100]
        code = process.wait()
    finally:
        timer.cancel()
        if sink:
            sink.close()
        ctx.log.flush()
    if timer.fired:
        ctx.log.write(f"===== {title}: stopped at the budget's end ({timeout:.0f} s)\n")
        code = 124
    return code, "".join(tail)[-4000:]


class _Stopper:
    """SIGTERM to a process group at its deadline, SIGKILL STOP_GRACE_S later."""

    def __init__(self, process: subprocess.Popen[str], deadline: float) -> None:
        import threading

        self.fired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(process, deadline), daemon=True)
        self._thread.start()

    def _watch(self, process: subprocess.Popen[str], deadline: float) -> None:
        if self._done.wait(max(0.0, deadline - time.monotonic())):
            return
        self.fired = True
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            if self._done.wait(wait):
                return

    def cancel(self) -> None:
        self._done.set()


def newest_run(ctx: Context, name: str) -> Path | None:
    folder = ctx.work / "runs" / name
    runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return runs[-1] if runs else None


def runner_part(name: str, matrix: str, only: tuple[str, ...] = ()) -> Callable[[Context], dict[str, Any]]:
    def run(ctx: Context) -> dict[str, Any]:
        path = ctx.work / "matrices" / f"{matrix}.toml"
        run_name = tomllib.loads(path.read_text(encoding="utf-8"))["run"]["name"]
        selection = [arg for pattern in only for arg in ("--only", pattern)]
        code, tail = run_logged(ctx, name, [str(ctx.venv_python), "-m", "runner", str(path),
                                            *selection, "--profile", ctx.profile,
                                            "--results-dir", str(ctx.work / "runs")],
                                ctx.left_s - PACK_S)
        run_dir = newest_run(ctx, run_name)
        if run_dir is not None:
            ctx.runs[name] = run_dir
        figures = run_figures(run_dir, on_gpu=ctx.profile == "full") if run_dir else {}
        problems = figures.pop("problems", [])
        if code:
            problems.insert(0, f"runner exited {code}: {last_line(tail)}")
        return {"ok": not problems, "detail": "; ".join(problems), "figures": figures}
    return run


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


CELL_COLUMNS = ("cell_name", "environment", "workload", "task", "batch_size", "precision", "jit",
                "status", "geomean_ms", "achieved_tflops", "peak_tflops", "fraction_of_peak",
                "tf32_effective", "device_name", "ttft_ms", "tokens_per_s", "energy_per_step_j",
                "energy_per_step_above_idle_j", "gpu_idle_power_w", "compile_s", "wall_s",
                "error")


def run_figures(run_dir: Path, on_gpu: bool) -> dict[str, Any]:
    """From a finished run folder: each cell's summary row (summary.csv, written by the runner),
    what its records say of the device (ran on the GPU, clock events), and the problems."""
    problems: list[str] = []
    rows = []
    summary = run_dir / "summary.csv"
    if summary.is_file():
        with summary.open(encoding="utf-8", newline="") as handle:
            rows = [{k: row.get(k) for k in CELL_COLUMNS} for row in csv.DictReader(handle)]
    else:
        problems.append(f"no summary.csv in {run_dir.name}")
    on_gpu_count, records, events = 0, 0, set()
    for path in sorted((run_dir / "cells").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            problems.append(f"{path.name}: not readable")
            continue
        if record.get("status") != "ok":
            continue
        records += 1
        device = str((record.get("effective") or {}).get("device") or "")
        if (record.get("metadata") or {}).get("gpu_name") and "cpu" not in device.lower():
            on_gpu_count += 1
        events.update(record.get("gpu_clock_events") or [])
    # A benchmark of the other profile is planned "not applicable": not this check's cell.
    rows = [row for row in rows if "profile only" not in (row["error"] or "")]
    for row in rows:
        if row["status"] not in ("ok", "not_applicable"):
            error = (row["error"] or "").strip().splitlines()
            problems.append(f"{row['cell_name']}: {row['status']} {error[0][:200] if error else ''}")
    if on_gpu and on_gpu_count < records:
        problems.append(f"{records - on_gpu_count} of {records} records did not compute on the GPU")
    return {"cells": rows, "records": records, "records_on_gpu": on_gpu_count,
            "clock_events": sorted(events), "run": run_dir.name, "problems": problems}


def overhead_part(ctx: Context) -> dict[str, Any]:
    """The matmul part's cells, each paired with a bare loop in one process of the same
    interpreter; run without the matmul part (--parts), it runs those cells itself, uncalibrated."""
    run_dir = ctx.runs.get("matmul")
    if run_dir is None:
        source = ctx.work / "matrices" / "matmul.toml"
        uncalibrated = source.with_name("matmul-uncalibrated.toml")
        uncalibrated.write_text(source.read_text(encoding="utf-8").replace(
            "calibrate = true", "calibrate = false"), encoding="utf-8")
        run_logged(ctx, "overhead (the matmul cells)", [
            str(ctx.venv_python), "-m", "runner", str(uncalibrated), "--profile", ctx.profile,
            "--results-dir", str(ctx.work / "runs")], ctx.left_s - PACK_S)
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
    code, tail = run_logged(ctx, "nvml", [str(ctx.venv_python), "-m", "runner", "doctor"],
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


def overhead_estimate(ctx: Context) -> float:
    pairs = [c for c in ctx.cells.get("matmul", []) if not c["calibration"]
             and not c["not_applicable"]]
    alone = ctx.parts and "matmul" not in ctx.parts     # it runs the matmul cells itself
    return len(pairs) * OVERHEAD_PER_PAIR_S + (
        RUN_FIXED_S + sum(process_s(c) for c in pairs) if alone else 0.0)


def runner(name: str, matrix: str, what: str, only: tuple[str, ...] = ()) -> Part:
    """A part that runs matrices/<matrix>.toml (its `only` cells) through the runner."""
    part = Part(name, what, lambda ctx: 0.0, runner_part(name, matrix, only), matrix, only)
    part.estimate = lambda ctx: matrix_estimate(ctx, part)
    return part


# Profiled passes on the GPU (docs/profiles.md): the bfloat16 products and the CNN's cells, after
# their runs; each profile must hold the device's kernels.
PROFILED = {"matmul": "*bfloat16*", "cnn": "*"}
PROFILE_PROCESS_S = 16.0


def profiles_part(ctx: Context) -> dict[str, Any]:
    runs = {name: ctx.runs[name] for name in PROFILED if name in ctx.runs}
    if not runs:
        return {"ok": False, "detail": "no matmul or cnn run to profile (their parts did not run)"}
    problems, rows = [], []
    for name, run_dir in runs.items():
        code, tail = run_logged(ctx, f"profiles ({name})", [
            str(ctx.venv_python), "-m", "runner", "profile", str(run_dir), "--cell",
            PROFILED[name]], ctx.left_s - PACK_S)
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
    cells = [c for name, pattern in PROFILED.items() for c in ctx.cells.get(name, [])
             if not c["calibration"] and not c["not_applicable"]
             and fnmatch.fnmatch(c["name"], pattern)]
    return len(PROFILED) * RUN_FIXED_S + len(cells) * PROFILE_PROCESS_S


PARTS = (   # in priority order: --minutes drops from the end
    runner("matmul", "matmul", "calibrated peak; 8192³ float32/bfloat16 products, torch and JAX"),
    Part("overhead", "runner ÷ bare loop of the same product, same interpreter",
         overhead_estimate, overhead_part),
    Part("pytest-gpu", "pytest -m gpu", lambda ctx: PYTEST_GPU_S, pytest_part),
    Part("nvml", "the GPU's clocks, power limit, idle power; runner doctor",
         lambda ctx: NVML_S, nvml_part),
    runner("keras-table", "keras_table", "BERT fit, Gemma generate (TTFT), size small: Keras "
           "on JAX and torch, HF", ("bert-fit-", "gemma-generate-")),
    runner("cnn", "cnn", "the small CNN's fit at batch 128: Keras (JAX, torch), torch, JAX"),
    Part("profiles", "per-op profiles of the bf16 products and the CNN cells (GPU kernels)",
         profiles_estimate, profiles_part),
    runner("elementwise", "elementwise", "SELU on 2^24 floats, eager and compiled, torch and JAX"),
    runner("bert-predict", "keras_table", "BERT predict at batch 256, size small: Keras on JAX "
           "and torch, HF", ("bert-predict-",)),
)


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


# --- the environment --------------------------------------------------------------------------

SITE_DIRS = ("import json, site, sys; print(json.dumps({'version': list(sys.version_info[:2]), "
             "'site': [p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))]}))")


def machine_python(ctx: Context) -> dict[str, Any]:
    """The machine's interpreter: its version and the folders its packages are in."""
    try:
        done = subprocess.run([ctx.python, "-c", SITE_DIRS], capture_output=True, text=True,
                              timeout=120, env=child_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckError(f"--python {ctx.python}: cannot run it ({exc})") from None
    if done.returncode:
        raise CheckError(f"--python {ctx.python}: exited {done.returncode}: "
                         f"{last_line(done.stderr)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_environment(ctx: Context, wheels: list[Wheel], facts: dict[str, Any]) -> str:
    """A virtual environment over the machine's interpreter: that interpreter's packages (torch,
    JAX, …) seen through a .pth file (a venv made from a venv's Python would not see them
    otherwise), the carried wheels installed into its own site-packages, which come first."""
    venv = ctx.work / "venv"
    made = subprocess.run([ctx.python, "-m", "venv", "--without-pip", "--clear", str(venv)],
                          capture_output=True, text=True, env=child_env())
    if made.returncode:
        raise CheckError(f"cannot make {venv}: {last_line(made.stderr)}")
    major, minor = facts["version"]
    site_packages = venv / "lib" / f"python{major}.{minor}" / "site-packages"
    lines = [f"import site; site.addsitedir({path!r})" for path in facts["site"]]
    lines.append(str(REPO))         # the runner itself, as an editable install would
    (site_packages / "gpu-check-machine.pth").write_text("\n".join(lines) + "\n")
    ctx.venv_python = venv / "bin" / "python"
    installed = "not installed (dry run)"
    if not ctx.dry_run:
        install = subprocess.run(
            [ctx.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-index", "--no-deps", "--no-compile", "--require-hashes", "--find-links",
             str(ctx.wheels), "--target", str(site_packages), "-r", str(ctx.wheel_list)],
            capture_output=True, text=True, env=child_env())
        ctx.log.write(install.stdout + install.stderr)
        if install.returncode and "No module named pip" in install.stderr:
            # An interpreter without pip (a uv-made venv): a wheel is a zip of its files, and
            # each one's hash was checked above; its .data scripts and headers are not needed.
            for wheel in wheels:
                unpack_wheel(ctx.wheels / str(wheel.filename), site_packages)
            installed = f"{len(wheels)} wheels unpacked (no pip in {ctx.python})"
        elif install.returncode:
            raise CheckError(f"installing the wheels failed: {last_line(install.stderr)}")
        else:
            installed = f"{len(wheels)} wheels installed"
    probe = subprocess.run([str(ctx.venv_python), "-c", "import runner.cli, runner.worker"],
                           cwd=REPO, capture_output=True, text=True, env=child_env())
    if probe.returncode:
        raise CheckError(f"the runner does not import in {venv}: {last_line(probe.stderr)}")
    return f"Python {major}.{minor} at {ctx.python}; {venv}; {installed}"


def set_up(ctx: Context) -> Outcome:
    started = time.monotonic()
    facts = machine_python(ctx)
    wheels = read_wheel_list(ctx.wheel_list)
    # The shipped list is for the lent machine's Python; another (a CPU rehearsal's) for its own.
    tags = python_tags(wheels)
    list_tag = MACHINE_PYTHON_TAG if ctx.wheel_list == WHEEL_LIST or not tags else min(tags)
    problems = check_wheel_list(wheels, list_tag)
    here = "cp{}{}".format(*facts["version"])
    notes = []
    if here != list_tag:
        mismatch = f"the wheels are for {list_tag}, {ctx.python} is {here}"
        if not ctx.dry_run:
            problems.append(mismatch)
        notes.append(f"{mismatch}: a real run would stop here")
    if ctx.wheels.is_dir():
        problems += check_wheel_folder(wheels, ctx.wheels)
        where = f"{ctx.wheels} checked"
    elif ctx.dry_run:
        where = (f"not fetched into {ctx.wheels} (`python3 benchmarks/gpu_check/check.py "
                 "fetch-wheels` does)")
    else:
        problems.append(f"{ctx.wheels}: no such folder (fetch the wheels first: `python3 "
                        "benchmarks/gpu_check/check.py fetch-wheels`, then carry it)")
        where = ""
    if problems:
        raise CheckError("carried wheels: " + "; ".join(problems))
    total = sum(w.size or 0 for w in wheels)
    detail = make_environment(ctx, wheels, facts)
    for matrix in dict.fromkeys(part.matrix for part in PARTS if part.matrix):
        plan_matrix(ctx, matrix)
    return Outcome("set-up", "ok", SETUP_S, time.monotonic() - started,
                   "; ".join([detail, f"wheels: {len(wheels)}, {mib(total)}, {where}", *notes]),
                   {"wheels": len(wheels), "wheels_bytes": total})


def dry_run_part(ctx: Context, part: Part) -> Outcome:
    """The runner's own plan of the part's matrix (nothing measured, nothing written)."""
    estimate = part.estimate(ctx)
    if part.matrix is None:
        return Outcome(part.name, "planned", estimate, detail=part.what)
    path = ctx.work / "matrices" / f"{part.matrix}.toml"
    selection = [arg for pattern in part.only for arg in ("--only", pattern)]
    code, tail = run_logged(ctx, f"{part.name} (plan)", [str(ctx.venv_python), "-m", "runner",
                                                         "plan", str(path), *selection,
                                                         "--profile", ctx.profile,
                                                         "--results-dir",
                                                         str(ctx.work / "runs")], 120)
    cells = part_cells(ctx, part)
    runnable = [c for c in cells if not c["not_applicable"]]
    na = [f"{c['name']}: {c['not_applicable']}" for c in cells
          if c["not_applicable"] and "profile only" not in c["not_applicable"]]
    status = "planned" if code == 0 and not na else "failed"
    detail = (f"{len(runnable)} cells ({sum(c['repeats'] for c in runnable)} processes)"
              + (f"; not applicable: {'; '.join(na)}" if na else "")
              + ("" if code == 0 else f"; runner plan exited {code}: {last_line(tail)}"))
    return Outcome(part.name, status, estimate, detail=detail,
                   figures={"planned": [c["name"] for c in runnable]})


# --- output -----------------------------------------------------------------------------------

def fmt(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    if number != number:
        return "—"
    return f"{number:.{digits}g}"


def summary_lines(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    """One screen: per part its status, time against estimate and its figures."""
    total = time.monotonic() - ctx.started
    lines = [f"GPU check ({'dry run, ' if ctx.dry_run else ''}profile {ctx.profile}): "
             f"{total:.0f} s of a {ctx.budget_s:.0f} s budget"]
    for outcome in outcomes:
        took = f"{outcome.elapsed_s:.0f} s" if outcome.elapsed_s is not None else "—"
        lines.append(f"[{outcome.status:>7}] {outcome.name:<12} {took:>6} (est. "
                     f"{outcome.estimate_s:.0f} s)  {outcome.detail}"[:200])
        lines += [f"          {line}" for line in figure_lines(outcome)]
    return lines


def figure_lines(outcome: Outcome) -> list[str]:
    figures = outcome.figures
    if outcome.name == "overhead":
        return [f"{p['api']} {p['precision']}: runner {fmt(p['runner_ms'])} ms ÷ bare "
                f"{fmt(p['bare_ms'])} ms = {p['runner_over_bare']:.3f}; in one process, "
                f"clock ÷ bare {p['clock_over_bare']:.3f}" for p in figures.get("pairs", [])]
    if outcome.name == "profiles":
        return [f"{p['cell']}: {p['status']} {p['source']} on {p['device']}, {fmt(p['profiled_ms'])} "
                f"ms/step (×{fmt(p['overhead'])}), idle {fmt(p['idle_pct'])} %, "
                f"{fmt(p['launches'])} launches/step; top {p['top']}"
                for p in figures.get("profiles", [])]
    if outcome.name == "pytest-gpu":
        return [", ".join(f"{n} {w}" for w, n in figures.items())] if figures else []
    if outcome.name == "nvml" and figures.get("gpu"):
        gpu = figures["gpu"]
        meta, clocks, power = gpu.get("metadata", {}), gpu.get("clocks", {}), gpu.get("power", {})
        return [f"{gpu.get('name')}, driver {meta.get('driver_version')}; SM clock now "
                f"{clocks.get('sm_now_mhz')} of {clocks.get('sm_max_mhz')} MHz, events "
                f"{clocks.get('events_now')}; power limit {fmt(power.get('limit_w'))} W "
                f"(default {fmt(power.get('default_limit_w'))}); idle "
                f"{fmt((gpu.get('idle_power') or {}).get('gpu_idle_power_w'))} W"]
    out = []
    for row in figures.get("cells", []):
        extra = ""
        if row.get("fraction_of_peak"):
            extra += (f" {fmt(row['achieved_tflops'])} TFLOP/s ({float(row['fraction_of_peak']):.0%}"
                      f" of the measured {fmt(row['peak_tflops'])}; TF32 {row['tf32_effective']})")
        if row.get("ttft_ms"):
            extra += f" TTFT {fmt(row['ttft_ms'])} ms, {fmt(row['tokens_per_s'])} tok/s"
        if row.get("energy_per_step_j"):
            extra += (f" {fmt(row['energy_per_step_j'])} J/step "
                      f"({fmt(row['energy_per_step_above_idle_j'])} above idle)")
        out.append(f"{row['cell_name']}: {row['status']} {fmt(row['geomean_ms'])} ms{extra}")
    if "records" in figures:
        out.append(f"{figures['records_on_gpu']} of {figures['records']} records on the GPU; "
                   f"clock events: {', '.join(figures['clock_events']) or 'none'}")
    return out


def write_summary(ctx: Context, outcomes: list[Outcome]) -> list[str]:
    lines = summary_lines(ctx, outcomes)
    atomic_write(ctx.out / "summary.txt", "\n".join(lines) + "\n")
    atomic_write(ctx.out / "summary.json", json.dumps(
        {"profile": ctx.profile, "dry_run": ctx.dry_run, "budget_s": ctx.budget_s,
         "elapsed_s": time.monotonic() - ctx.started,
         "parts": [dataclasses.asdict(o) for o in outcomes]}, indent=1, default=str))
    return lines


# --- main -------------------------------------------------------------------------------------

def check(ctx: Context) -> int:
    outcomes: list[Outcome] = []
    try:
        outcomes.append(set_up(ctx))
        kept, dropped = choose_parts(ctx, tuple(p for p in PARTS
                                                if not ctx.parts or p.name in ctx.parts))
    except CheckError as exc:
        outcomes.append(Outcome("set-up", "failed", SETUP_S, time.monotonic() - ctx.started,
                                str(exc)))
        print("\n".join(write_summary(ctx, outcomes)))
        return 2
    print(f"set-up: {outcomes[0].detail}", flush=True)
    for part in kept:
        estimate = part.estimate(ctx)
        if ctx.dry_run:
            outcomes.append(dry_run_part(ctx, part))
        elif estimate > ctx.left_s - PACK_S:
            outcomes.append(Outcome(part.name, "skipped", estimate, detail=(
                f"budget: {ctx.left_s - PACK_S:.0f} s left, needs about {estimate:.0f} s")))
        else:
            print(f"{part.name}: {part.what} (about {estimate:.0f} s) …", flush=True)
            began = time.monotonic()
            try:
                result = part.run(ctx)
            except Exception as exc:  # a broken part is the check's finding, not its end
                result = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
            outcomes.append(Outcome(part.name, "ok" if result["ok"] else "failed", estimate,
                                    time.monotonic() - began, result.get("detail", ""),
                                    result.get("figures", {})))
        print(f"{part.name}: {outcomes[-1].status} {outcomes[-1].detail}"[:300], flush=True)
        write_summary(ctx, outcomes)       # a check stopped from outside keeps what it has
    outcomes += [Outcome(p.name, "dropped", p.estimate(ctx),
                         detail=f"--minutes {ctx.budget_s / 60:g}: lower priority")
                 for p in dropped]
    packed = pack_runs(ctx.work / "runs", ctx.out / "runs.tar.gz")
    outcomes.append(Outcome("archive", "ok", PACK_S, detail=f"runs.tar.gz; left out: {packed}"))
    lines = write_summary(ctx, outcomes)
    problems = check_out_folder(ctx.out)
    if problems:
        lines.append("OUT would not come back whole: " + "; ".join(problems))
    print("\n" + "\n".join(lines))
    failed = [o for o in outcomes if o.status == "failed"] or problems
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/gpu_check/run.sh",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="folder for what comes back (at most 8 files)")
    parser.add_argument("--minutes", type=float, default=DEFAULT_MINUTES,
                        help=f"the budget (default {DEFAULT_MINUTES:g}): lower-priority parts "
                             "are dropped to fit")
    parser.add_argument("--dry-run", action="store_true", help="plan everything, run nothing")
    parser.add_argument("--python", default="python3",
                        help="the machine's interpreter, with CUDA torch and JAX (default python3)")
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS,
                        help="the carried wheels' folder (default .whl at the repository root)")
    parser.add_argument("--wheel-list", type=Path, default=WHEEL_LIST, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="scratch folder: the environment, the matrices, the run folders")
    parser.add_argument("--profile", choices=("full", "smoke"), default="full",
                        help="smoke: tiny sizes, a rehearsal on a CPU")
    parser.add_argument("--parts", help="only these parts, comma-separated (a rerun): "
                        + ", ".join(p.name for p in PARTS))
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["fetch-wheels"]:
        fetch = argparse.ArgumentParser(prog="check.py fetch-wheels")
        fetch.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
        fetch.add_argument("--wheel-list", type=Path, default=WHEEL_LIST)
        fetch.add_argument("--python-version", default="3.12")
        args = fetch.parse_args(argv[1:])
        return fetch_wheels(args.wheels, args.wheel_list, args.python_version)
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be above 0")
    parts = tuple(args.parts.split(",")) if args.parts else ()
    unknown = sorted(set(parts) - {p.name for p in PARTS})
    if unknown:
        parser.error(f"--parts: no part {', '.join(unknown)} (the parts: "
                     f"{', '.join(p.name for p in PARTS)})")
    out = args.out.absolute()
    others = sorted(p.name for p in out.iterdir() if p.name.split(".partial")[0] not in
                    OUT_FILES) if out.is_dir() else []
    if others:
        parser.error(f"{out} holds files the check does not write ({', '.join(others[:3])}): "
                     "give an empty folder, or a previous check's")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():         # a previous check's files: this one's replace them
        stale.unlink()
    work = args.work.absolute()
    shutil.rmtree(work / "runs", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    with (out / "check.log").open("a", encoding="utf-8") as log:
        ctx = Context(out=out, work=work, python=args.python, wheels=args.wheels.absolute(),
                      wheel_list=args.wheel_list.absolute(), profile=args.profile,
                      dry_run=args.dry_run, budget_s=args.minutes * 60, parts=parts, log=log)
        return check(ctx)


if __name__ == "__main__":
    sys.exit(main())
