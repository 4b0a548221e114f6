"""The GPU check: everything a lent GPU machine should run, in one command of a few minutes.

    benchmarks/gpu_check/run.sh OUT [--minutes N] [--parts a,b] [--dry-run] [--python PATH]
                                    [--wheels DIR] [--work DIR] [--profile full|smoke]
    python3 benchmarks/gpu_check/check.py fetch-wheels [--wheels DIR]

It makes a virtual environment over the machine's own interpreter (which holds CUDA torch and
JAX), installs the wheels the repository carries into it without any network (Keras, keras-hub,
torchao and the runner's own dependencies the machine lacks, each checked against its hash),
then runs its parts in priority order within the budget: the runner's matrices under matrices/
(profiled, quantized, tuned, the layer family, the Keras table), the overhead benchmark
(runner ÷ a bare loop), `pytest -m gpu` and the GPU's NVML state. OUT receives at most 8 files
(the run folders as one archive, the pytest log, the whole log, the summary as text and JSON),
each under 16 MiB; the summary is also printed, one screen, and ends with the next call's
`--parts` when some did not fit.

--minutes N (default 8) keeps, in priority order, each part whose estimate fits what is left;
at its turn a part that would overrun what is left waits for a later call (a shorter one after
it may still run), and a running part is stopped at the budget's end, so the check ends in
time whatever the machine does. --parts a,b runs only those (a later call).
--dry-run plans everything (the environment, the carried wheels, every matrix through the
runner's own `plan`, the budget, the output limits) and runs nothing on a device.
--profile smoke runs the same parts at tiny sizes: a rehearsal of the whole path on a CPU.

Its modules: environment.py (the environment, the runner's plans, running its commands),
part.py (a part; one that runs a matrix, sized by the runner's own plan of it: `python -m
runner plan --json`), parts.py (the parts in priority order, the budget), harness_parts.py
(overhead, pytest, NVML), tuned_part.py (tune, then both tiers), figures.py (a part's figures
from the runner's folders), summary.py (the one screen and the JSON), context.py (what they
share), beside carried_wheels.py and out_folder.py. Standard library only: it starts under the
machine's interpreter, which lacks the runner's dependencies until the check's environment
holds them; the runner's code runs in subprocesses of that environment's interpreter.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from pathlib import Path

from carried_wheels import WHEEL_LIST, CheckError, fetch_wheels
from context import PACK_S, REPO, SETUP_S, Context, Outcome
from environment import set_up
from out_folder import OUT_FILES, check_out_folder, pack_runs
from part import Part
from parts import PARTS, choose_parts, dry_run_part, queries
from summary import write_summary

DEFAULT_WHEELS = REPO / ".whl"          # git-ignored; the device tool carries it by name
DEFAULT_WORK = Path("/tmp/gpu-check")
DEFAULT_MINUTES = 8.0
HISTORY = "history.sqlite"          # the runner's history database, beside its run folders


def check(ctx: Context) -> int:
    outcomes: list[Outcome] = []
    chosen = tuple(p for p in PARTS if not ctx.parts or p.name in ctx.parts)
    try:
        outcomes.append(set_up(ctx, queries(chosen)))
        kept, _ = choose_parts(ctx, chosen)
    except CheckError as exc:
        outcomes.append(Outcome("set-up", "failed", SETUP_S, time.monotonic() - ctx.started,
                                str(exc)))
        print("\n".join(write_summary(ctx, outcomes)))
        return 2
    print(f"set-up: {outcomes[0].detail}", flush=True)
    for part in chosen:
        outcomes.append(part_outcome(ctx, part, part in kept))
        print(f"{part.name}: {outcomes[-1].status} {outcomes[-1].detail}"[:300], flush=True)
        write_summary(ctx, outcomes)       # a check stopped from outside keeps what it has
    packed = pack_runs(ctx.work / "runs", ctx.out / "runs.tar.gz")
    outcomes.append(Outcome("archive", "ok", PACK_S, detail=f"runs.tar.gz; left out: {packed}"))
    lines = write_summary(ctx, outcomes)
    problems = check_out_folder(ctx.out)
    if problems:
        lines.append("OUT would not come back whole: " + "; ".join(problems))
    print("\n" + "\n".join(lines))
    failed = [o for o in outcomes if o.status == "failed"] or problems
    return 1 if failed else 0


def part_outcome(ctx: Context, part: Part, kept: bool) -> Outcome:
    """A part planned (a dry run), run, or passed over: at its turn, one whose estimate does
    not fit what is left waits for a later call (dropped: the budget never held it; skipped:
    the parts before it took longer than their estimates)."""
    estimate = part.estimate(ctx)
    if ctx.dry_run:
        planned = dry_run_part(ctx, part)
        if kept or planned.status == "failed":
            return planned
        return dataclasses.replace(planned, status="dropped", detail=(
            f"--minutes {ctx.budget_s / 60:g}: no room after the parts before it; "
            f"{planned.detail}"))
    if estimate > ctx.left_s - PACK_S:
        ctx.kept.discard(part.name)
        return Outcome(part.name, "dropped" if not kept else "skipped", estimate, detail=(
            f"budget: {max(0.0, ctx.left_s - PACK_S):.0f} s left, needs about {estimate:.0f} s"))
    print(f"{part.name}: {part.what} (about {estimate:.0f} s) …", flush=True)
    began = time.monotonic()
    try:
        result = part.run(ctx)
    except Exception as exc:  # a broken part is the check's finding, not its end
        result = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    return Outcome(part.name, "ok" if result["ok"] else "failed", estimate,
                   time.monotonic() - began, result.get("detail", ""), result.get("figures", {}))


def fresh_runs(runs: Path, earlier: Path) -> None:
    """An empty runs folder (the archive packs this call's runs) but for the history database
    the runner records every run in (history.sqlite beside the run folders, from which it
    estimates a cell's time): an earlier call's on this machine stays (it holds the carried one
    too), else an earlier loan's (`earlier`, carried) starts it."""
    history = runs / HISTORY
    kept = history.read_bytes() if history.is_file() else None
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    if kept is not None:
        history.write_bytes(kept)
    elif earlier.is_file():
        shutil.copyfile(earlier, history)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/gpu_check/run.sh",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="folder for what comes back (at most 8 files)")
    parser.add_argument("--minutes", type=float, default=DEFAULT_MINUTES,
                        help=f"the budget (default {DEFAULT_MINUTES:g}): parts that do not fit "
                             "wait for a later call (--parts)")
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
    parser.add_argument("--parts", help="only these parts, comma-separated (a later call): "
                        + ", ".join(p.name for p in PARTS))
    parser.add_argument("--history", type=Path, help="a history database of earlier checks "
                        "(runs/history.sqlite of their runs.tar.gz): the runner's estimates "
                        "become this GPU's own (default: WHEELS/history.sqlite where it exists)")
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
    fresh_runs(work / "runs", args.history or args.wheels / HISTORY)
    with (out / "check.log").open("a", encoding="utf-8") as log:
        ctx = Context(out=out, work=work, python=args.python, wheels=args.wheels.absolute(),
                      wheel_list=args.wheel_list.absolute(), profile=args.profile,
                      dry_run=args.dry_run, budget_s=args.minutes * 60, parts=parts, log=log)
        return check(ctx)


if __name__ == "__main__":
    sys.exit(main())
