"""Command line: `python -m runner MATRIX [options]` and the subcommands plan, build, report,
compare, doctor, export, import, reproduce, history, bisect, ab, scan, lock, profile,
prices, tune.

Exit codes: 0 all cells ok; 1 some cells failed; 2 invalid input or usage (one line on stderr);
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP); 70 an internal error
(one line, the traceback in a log file). See runner.errors.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from rich.console import Console

from . import settings
from .errors import (EXIT_INTERNAL, EXIT_USAGE, UsageError, did_you_mean,
                     interrupted_exit_code, one_line, os_error_line, terminating_signals_interrupt,
                     write_traceback)

# The table of commands: the command's name → its module in runner/commands/ (each with
# add_arguments(parser) and main(args, console) -> int) and what it does, in one line (its
# --help and the docs' CLI reference, docs/cli.md, are made from the parsers and this line).
# "run" is the command without a name.
COMMANDS = {
    "run": ("run", "run the matrix: every cell × repeat in a fresh process or container"),
    "plan": ("plan", "the plan: cells, repeats, not-applicable ones and why; the setup a run "
                     "would take (nothing run or written)"),
    "build": ("build", "build the environments a matrix needs (local environments or images), "
                       "run nothing"),
    "report": ("report", "rebuild the merged outputs (tables, report.md, report.html, plots) "
                         "of a run folder from its records"),
    "compare": ("compare", "judge run B against run A, cell by cell (exit 1 when a cell got "
                           "slower)"),
    "doctor": ("doctor", "the path a run would take here and whether it can (executor, "
                         "flavour, GPUs, driver, Docker, Ray, disk); --measure: this machine's "
                         "noise"),
    "export": ("export", "the images a matrix needs, or exactly those a run used, in one "
                         "archive with a checksum"),
    "import": ("import_", "load an archive written by export: its checksum, then each image's "
                          "lock and recipe labels against this checkout"),
    "reproduce": ("reproduce", "run a finished run again in exactly its environments, then "
                               "compare with the original"),
    "history": ("history", "the results database: import, list, show, diff, regressions, "
                           "site"),
    "bisect": ("bisect", "which changed distribution moved a cell between two runs"),
    "ab": ("ab", "two environments' cells in pairs (A B B A …), then B ÷ A per cell with its "
                 "interval, as a PR-ready Markdown table"),
    "scan": ("scan", "a channel's dated builds measured day by day into the history, every "
                     "change point between days named, the first bad day bisected"),
    "lock": ("lock", "make or check the image folders' hash-locked requirements (the one "
                     "command behind every lock)"),
    "profile": ("profile", "a per-op profile of cells of a finished run (`profile RUN_DIR`), "
                           "or two profiles side by side (`profile diff`)"),
    "prices": ("prices", "the price tables a matrix's [cost] reads: show, check, import a "
                         "SkyPilot catalog (offline)"),
    "tune": ("tune", "the tuned tier: search each tuned cell's knobs within the same budget "
                     "for every environment, into a tuning folder a run reads"),
}
SUBCOMMANDS = tuple(COMMANDS)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's default prints usage)
        raise UsageError(f"{self.prog}: {message}")


def command_module(command: str) -> ModuleType:
    return importlib.import_module(f"{__package__}.commands.{COMMANDS[command][0]}")


def build_parser(command: str) -> argparse.ArgumentParser:
    summary = COMMANDS[command][1]
    description = (f"{summary[0].upper()}{summary[1:]}.\n\n{__doc__}" if command == "run"
                   else f"{summary[0].upper()}{summary[1:]}.")
    parser = _Parser(prog=f"python -m runner{'' if command == 'run' else ' ' + command}",
                     description=description,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    command_module(command).add_arguments(parser)
    return parser


LOG_WIDTH = 100      # the columns the tables and the first screen are laid out for


def make_console() -> Console:
    """The console every command prints to. A pipe or a log file has no width of its own, and
    rich would assume 80 columns and fold the set-up table's lock paths mid-word; such output
    gets the 100 columns the tables are laid out for. A terminal (or COLUMNS) keeps its own."""
    console = Console(stderr=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=False, width=LOG_WIDTH)
    return console


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    console = make_console()
    try:
        command = "run"
        if argv and argv[0] in SUBCOMMANDS:
            command = argv.pop(0)
            # A command whose first word may be left out (`profile RUN_DIR`) says so.
            argv = getattr(command_module(command), "implied_action", list)(argv)
        elif argv and not argv[0].startswith("-") and not Path(argv[0]).suffix \
                and not Path(argv[0]).exists():
            raise UsageError(f"unknown command {argv[0]!r}{did_you_mean(argv[0], SUBCOMMANDS)}")
        args = build_parser(command).parse_args(argv)
        settings.validate()      # a bad DL_BENCH_* value: one line, before anything is made
        with terminating_signals_interrupt():
            return dispatch(command, args, console)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt as exc:    # Ctrl-C, SIGTERM, SIGHUP
        print("interrupted", file=sys.stderr)
        return interrupted_exit_code(exc)
    except OSError as exc:      # the machine said no: a full disk, a folder that cannot be written
        return fail(os_error_line(exc), EXIT_USAGE)
    except Exception as exc:  # a bug: one line here, the traceback in a file
        log = write_traceback(exc)
        where = f"; the traceback is in {log}" if log else ""
        return fail(f"internal error ({type(exc).__name__}: {exc}){where} — please report it",
                    EXIT_INTERNAL)


def fail(message: str, code: int) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return code


def dispatch(command: str, args: argparse.Namespace, console: Console) -> int:
    from .results.data.store import results_root

    if getattr(args, "results_dir", None) is not None:
        # Resolved once, here: every executor's worker starts in a folder of its own.
        args.results_dir = results_root(args.results_dir)
    return command_module(command).main(args, console)
