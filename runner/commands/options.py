"""Argument groups several commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..executors import kinds

if TYPE_CHECKING:
    from ..run.pipeline import Options

PROFILES = ("auto", "full", "smoke")


def add_matrix_options(parser: argparse.ArgumentParser) -> None:
    """The matrix and what selects and places its cells (run, plan, build)."""
    parser.add_argument("matrix", type=Path, help="matrix file (TOML)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN", type=pattern,
                        help="run only cells whose name contains or globs PATTERN (repeatable)")
    parser.add_argument("--profile", choices=PROFILES,
                        help="override [run] profile (auto: smoke when no GPU is found)")
    parser.add_argument("--executor", choices=kinds.choices(), help="override [run] executor")
    parser.add_argument("--parallel", type=parallel, metavar="N|auto",
                        help="cells at once: auto (one per GPU) or at most N; 1: one at a time "
                             "(overrides [run] parallel)")
    parser.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                        help="the Ray cluster of --executor ray (default: RAY_ADDRESS, else a "
                             "local Ray instance)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="folder for run folders (default: results/ of the repository)")
    parser.add_argument("--profile-cells", action="append", default=[], metavar="GLOB",
                        type=pattern,
                        help="after their timed repeats, profile the cells GLOB names (a name, "
                             "glob or id; repeatable): a per-op profile in profiles/, beside "
                             "[profiling] cells")


def add_dry_run_and_resume(parser: argparse.ArgumentParser) -> None:
    """--dry-run and --resume (run, ab)."""
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    parser.add_argument("--resume", nargs="?", const=True, default=None, type=Path,
                        metavar="RUN_DIR",
                        help="continue a run (default: the latest run of this matrix's name); "
                             "finished cells × repeats are skipped")


def add_cost_options(parser: argparse.ArgumentParser) -> None:
    """The caps a run stops before passing (run, plan)."""
    parser.add_argument("--budget", type=positive, default=None, metavar="USD",
                        help="stop before a cell × repeat whose estimate would take the run's "
                             "cost past USD at the [cost] VM's list price (overrides [cost] "
                             "budget; --resume carries what was spent)")
    parser.add_argument("--max-hours", type=positive, default=None, metavar="H",
                        help="stop before a cell × repeat whose estimate would take the run "
                             "past H hours (--resume carries the time taken)")


def pattern(text: str) -> str:
    """A cell name, glob or id (--only, --profile-cells, profile --cell): an empty one would
    match every cell (every name contains it), so it is refused."""
    if not text.strip() or not text.isprintable():
        raise argparse.ArgumentTypeError(f"expected a cell name, glob or id, got {text!r}")
    return text


def add_tuning_option(parser: argparse.ArgumentParser) -> None:
    """Where the tuned tier's cells read their knobs (run, plan)."""
    parser.add_argument("--tuning", action="append", type=Path, default=[], metavar="DIR",
                        help="tier = \"tuned\" cells take their knobs from this tuning folder "
                             "(python -m runner tune wrote it; repeatable, the first that has a "
                             "cell wins; default: the matrix's newest that has it)")


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def parallel(text: str) -> int | str:
    if text == "auto":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive whole number or auto, got {text!r}")


def run_options(args: argparse.Namespace, **overrides: Any) -> Options:
    """pipeline.Options from run, plan and build's arguments."""
    from ..run.pipeline import Options

    caps = {k: getattr(args, k) for k in ("budget", "max_hours", "tuning") if hasattr(args, k)}
    opts = Options(matrix_path=args.matrix, only=args.only, profile=args.profile,
                   executor=args.executor, parallel=args.parallel,
                   ray_address=args.ray_address, profile_cells=args.profile_cells, **caps,
                   **overrides)
    if args.results_dir is not None:
        opts.results_dir = args.results_dir
    return opts
