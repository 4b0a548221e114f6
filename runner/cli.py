"""Command line: `python -m runner MATRIX [options]` and the subcommands plan, build, report,
compare, doctor, export, import, reproduce.

Exit codes: 0 all cells ok; 1 some cells failed; 2 invalid input or usage (one line on stderr);
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP); 70 an internal error
(one line, the traceback in a log file). See runner.errors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from .errors import (EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UsageError, did_you_mean,
                     interrupted_exit_code, one_line, os_error_line, terminating_signals_interrupt,
                     write_traceback)

SUBCOMMANDS = ("run", "plan", "build", "report", "compare", "doctor", "export", "import",
               "reproduce", "history", "bisect")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's default prints usage)
        raise UsageError(f"{self.prog}: {message}")


def _add_matrix_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("matrix", type=Path, help="matrix file (TOML)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="run only cells whose name contains or globs PATTERN (repeatable)")
    parser.add_argument("--profile", choices=("auto", "full", "smoke"),
                        help="override [run] profile (auto: smoke when no GPU is found)")
    parser.add_argument("--executor", choices=("auto", "local", "docker", "ray"),
                        help="override [run] executor")
    parser.add_argument("--parallel", type=_parallel, metavar="N|auto",
                        help="cells at once: auto (one per GPU) or at most N; 1: one at a time "
                             "(overrides [run] parallel)")
    parser.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                        help="the Ray cluster of --executor ray (default: RAY_ADDRESS, else a "
                             "local Ray instance)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="folder for run folders (default: results/ of the repository)")


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    """doctor --measure (runner/noise.py): this machine's noise, kept as its machine profile."""
    parser.add_argument("--measure", action="store_true",
                        help="measure this machine in the matrix's environments: the GPU's "
                             "state, the harness overhead, an A/A run's run-to-run spread and "
                             "the compare threshold it supports (results/machine-profiles/)")
    parser.add_argument("--runs", type=int, default=3, metavar="N",
                        help="--measure: A/A runs of the same cells (default 3)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="--measure: the A/A's cells (default: the first cell of each "
                             "workload)")
    parser.add_argument("--profile", choices=("auto", "full", "smoke"),
                        help="--measure: override [run] profile")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="--measure: the results folder whose machine-profiles/ to write "
                             "(default: results/ of the repository)")


def _parallel(text: str) -> int | str:
    if text == "auto":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a positive whole number or auto, got {text!r}")


def build_parser(command: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python -m runner{'' if command == 'run' else ' ' + command}",
                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    if command in ("run", "plan", "build"):
        _add_matrix_options(parser)
    if command == "build":
        parser.add_argument("--push", metavar="REGISTRY", default=None,
                            help="push each built image to REGISTRY (HOST[:PORT]) and record the "
                                 "digest that names it (results/<name>/images.json)")
    if command == "run":
        parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
        parser.add_argument("--resume", nargs="?", const=True, default=None, type=Path,
                            metavar="RUN_DIR",
                            help="continue a run (default: the latest run of this matrix's name); "
                                 "finished cells × repeats are skipped")
    if command == "doctor":
        parser.add_argument("matrix", type=Path, nargs="?", default=None,
                            help="the matrix whose path to check (default: matrix.toml of the "
                                 "repository)")
        parser.add_argument("--executor", choices=("auto", "local", "docker", "ray"),
                            help="check this executor instead of the matrix's")
        parser.add_argument("--ray-address", metavar="HOST:PORT", default=None,
                            help="the Ray cluster to check (default: RAY_ADDRESS, else a local "
                                 "Ray instance)")
        _add_measure_options(parser)
    if command == "report":
        parser.add_argument("run_dir", type=Path, help="a run folder under results/")
    if command == "export":
        parser.add_argument("source", type=Path, metavar="MATRIX|RUN_DIR",
                            help="a matrix (the images it needs, built when missing) or a run "
                                 "folder (exactly the images its cells ran in)")
        parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                            help="the archive to write (a tar; FILE.sha256 beside it)")
        parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                            help="only the environments of cells whose name matches PATTERN")
        parser.add_argument("--profile", choices=("auto", "full", "smoke"),
                            help="override [run] profile")
    if command == "import":
        parser.add_argument("archive", type=Path, help="an archive written by runner export")
    if command == "reproduce":
        parser.add_argument("run_dir", type=Path, help="a finished run folder under results/")
        parser.add_argument("--results-dir", type=Path, default=None,
                            help="folder for the new run folder (default: results/ of the "
                                 "repository)")
    if command in ("history", "bisect"):
        from .history.cli import add_arguments

        add_arguments(parser, command)
    if command == "compare":
        parser.add_argument("run_a", type=Path, help="baseline run folder (A)")
        parser.add_argument("run_b", type=Path, help="run folder to judge against A (B)")
        parser.add_argument("--threshold", type=float, default=None,
                            help="practical threshold on the ratio of medians (default: from the "
                                 "runs' machine profiles when both have one, else 0.05)")
        parser.add_argument("--alpha", type=float, default=0.05,
                            help="significance level of the test on repeat medians (default 0.05)")
        parser.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                            help="write the Markdown here (default: RUN_B/compare-<A>.md)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    console = Console(stderr=False)
    try:
        command = "run"
        if argv and argv[0] in SUBCOMMANDS:
            command = argv.pop(0)
        elif argv and not argv[0].startswith("-") and not Path(argv[0]).suffix \
                and not Path(argv[0]).exists():
            raise UsageError(f"unknown command {argv[0]!r}{did_you_mean(argv[0], SUBCOMMANDS)}")
        args = build_parser(command).parse_args(argv)
        with terminating_signals_interrupt():
            return dispatch(command, args, console)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt as exc:    # Ctrl-C, SIGTERM, SIGHUP
        print("interrupted", file=sys.stderr)
        return interrupted_exit_code(exc)
    except OSError as exc:      # the machine said no: a full disk, a folder that cannot be written
        return fail(os_error_line(exc), EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - a bug: one line here, the traceback in a file
        log = write_traceback(exc)
        where = f"; the traceback is in {log}" if log else ""
        return fail(f"internal error ({type(exc).__name__}: {exc}){where} — please report it",
                    EXIT_INTERNAL)


def fail(message: str, code: int) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def dispatch(command: str, args: argparse.Namespace, console: Console) -> int:
    from . import run
    from .results.store import results_root

    if getattr(args, "results_dir", None) is not None:
        # Resolved once, here: every executor's worker starts in a folder of its own.
        args.results_dir = results_root(args.results_dir)

    if command in ("run", "plan", "build"):
        opts = run.Options(matrix_path=args.matrix, only=args.only, profile=args.profile,
                           executor=args.executor, parallel=args.parallel,
                           ray_address=args.ray_address, push=getattr(args, "push", None),
                           resume=getattr(args, "resume", None),
                           dry_run=getattr(args, "dry_run", False) or command == "plan")
        if args.results_dir is not None:
            opts.results_dir = args.results_dir
        if command == "build":
            return run.build_only(opts, console)
        return run.execute(opts, console)
    if command == "report":
        return run.report_only(args.run_dir, console)
    if command == "doctor":
        from . import doctor
        from .matrix import REPO_ROOT

        default = REPO_ROOT / "matrix.toml"
        matrix = args.matrix or (default if default.is_file() else None)
        if args.measure:
            from . import noise

            if matrix is None:
                raise UsageError("doctor --measure: name the matrix whose environments to measure")
            args.matrix = matrix
            return noise.main(args, console)
        if args.only or args.profile or args.results_dir or args.runs != 3:
            raise UsageError("doctor: --only, --profile, --results-dir and --runs go with "
                             "--measure")
        return doctor.main(console, matrix, args.executor, ray_address=args.ray_address)
    if command in ("export", "import", "reproduce"):
        from . import reproduce

        if command == "export":
            opts = run.Options(matrix_path=args.source, only=args.only, profile=args.profile)
            return reproduce.export_only(args.source, args.output, opts, console)
        if command == "import":
            return reproduce.import_only(args.archive, console)
        return reproduce.reproduce(args.run_dir, args.results_dir, console)
    if command in ("history", "bisect"):
        from .history.cli import main as history_main

        return history_main(command, args, console)
    if command == "compare":
        from .results.compare import run_compare

        return run_compare(args.run_a, args.run_b, args.threshold, args.alpha, args.markdown,
                           console)
    return EXIT_OK
