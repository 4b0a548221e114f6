"""The GPU check's environment: a virtual environment over the machine's own interpreter (its
CUDA torch and JAX seen through a .pth file) with the carried wheels installed offline, the
check's matrices naming its interpreter, the runner's own plan of each (`python -m runner plan
--json`: the cells and their estimates), and every runner command run in it, logged and stopped
at the budget's end. Standard library only (check.py's reason)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from carried_wheels import (MACHINE_PYTHON_TAG, WHEEL_LIST, CheckError, Wheel, check_wheel_folder,
                            check_wheel_list, mib, python_tags, read_wheel_list, unpack_wheel)
from context import HERE, REPO, SETUP_S, Context, Outcome, last_line

MATRICES = HERE / "matrices"
# The interpreter path the matrices name; replaced by the check's environment's own.
MATRIX_PYTHON = "/tmp/gpu-check/venv/bin/python"
STOP_GRACE_S = 15.0                     # SIGTERM, then SIGKILL: a run finalises its reports
# `runner plan` processes side by side in the set-up (each mostly imports: one a core)
PLANS_AT_ONCE = min(8, max(4, os.cpu_count() or 4))


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120", **extra}
    env.pop("PYTHONPATH", None)         # the runner puts itself on its workers' path
    return env


def runner_command(ctx: Context, *args: str) -> list[str]:
    """`python -m runner ARGS` in the check's environment."""
    return [str(ctx.venv_python), "-m", "runner", *args]


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
    timer = _Stopper(process, time.monotonic() + max(timeout, 1.0))
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


# --- the runner's plans -----------------------------------------------------------------------

def write_matrix(ctx: Context, matrix: str) -> Path:
    """matrices/<matrix>.toml, with the check's interpreter in it, in the work folder."""
    text = (MATRICES / f"{matrix}.toml").read_text(encoding="utf-8")
    path = ctx.matrix(matrix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(MATRIX_PYTHON, str(ctx.venv_python)), encoding="utf-8")
    return path


def plan_command(ctx: Context, matrix: str, only: tuple[str, ...]) -> list[str]:
    selection = [arg for pattern in only for arg in ("--only", pattern)]
    return runner_command(ctx, "plan", str(ctx.matrix(matrix)), *selection, "--profile",
                          ctx.profile, "--results-dir", str(ctx.work / "runs"), "--json")


def plan_matrices(ctx: Context, queries: list[tuple[str, tuple[str, ...]]]) -> None:
    """The runner's plan (`plan --json`) of each (matrix, --only patterns), side by side, into
    ctx.plans; each one's lines in check.log. CheckError when the runner cannot plan one."""
    for matrix in dict.fromkeys(matrix for matrix, _ in queries):
        write_matrix(ctx, matrix)

    def plan(query: tuple[str, tuple[str, ...]]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(plan_command(ctx, *query), cwd=REPO, capture_output=True,
                              text=True, env=child_env(), timeout=300)

    with ThreadPoolExecutor(PLANS_AT_ONCE) as pool:
        done = list(pool.map(plan, queries))
    for (matrix, only), finished in zip(queries, done, strict=True):
        ctx.log.write(f"\n===== {matrix} (plan): {' '.join(finished.args)}\n{finished.stderr}")
        if finished.returncode:
            raise CheckError(f"matrices/{matrix}.toml cannot be planned: "
                             f"{last_line(finished.stderr)}")
        ctx.plans[matrix, only] = json.loads(finished.stdout)
    ctx.log.flush()


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
    installed = "not installed (dry run)" if ctx.dry_run else \
        install_wheels(ctx, wheels, site_packages)
    probe = subprocess.run([str(ctx.venv_python), "-c", "import runner.cli, runner.worker"],
                           cwd=REPO, capture_output=True, text=True, env=child_env())
    if probe.returncode:
        raise CheckError(f"the runner does not import in {venv}: {last_line(probe.stderr)}")
    return f"Python {major}.{minor} at {ctx.python}; {venv}; {installed}"


def install_wheels(ctx: Context, wheels: list[Wheel], site_packages: Path) -> str:
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
        return f"{len(wheels)} wheels unpacked (no pip in {ctx.python})"
    if install.returncode:
        raise CheckError(f"installing the wheels failed: {last_line(install.stderr)}")
    return f"{len(wheels)} wheels installed"


def checked_wheels(ctx: Context, facts: dict[str, Any]) -> tuple[list[Wheel], str, list[str]]:
    """The carried wheels, checked against their list, the locks and their hashes: (wheels,
    where they are, notes). CheckError when they would not install."""
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
    return wheels, where, notes


def set_up(ctx: Context, queries: list[tuple[str, tuple[str, ...]]]) -> Outcome:
    """The environment, its wheels and the runner's plan of each query."""
    started = time.monotonic()
    facts = machine_python(ctx)
    wheels, where, notes = checked_wheels(ctx, facts)
    total = sum(w.size or 0 for w in wheels)
    detail = make_environment(ctx, wheels, facts)
    plan_matrices(ctx, queries)
    return Outcome("set-up", "ok", SETUP_S, time.monotonic() - started,
                   "; ".join([detail, f"wheels: {len(wheels)}, {mib(total)}, {where}", *notes]),
                   {"wheels": len(wheels), "wheels_bytes": total})
