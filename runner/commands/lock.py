"""`python -m runner lock [IMAGE …] [--upgrade | --upgrade-package NAME …] [--check]`: make the
image folders' hash-locked locks from their requirements*.in, both flavours, with the one set of
flags runner/environments/locking.py declares; `--check`: every lock still is what its `.in`
resolves to, whole: versions, hashes, markers, indexes (exit 1 naming the first difference). A new image folder is one `.in` and this
command."""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE",
                        help="image folders under images/ (default: every one with a "
                             "requirements.in)")
    moves = parser.add_mutually_exclusive_group()
    moves.add_argument("--upgrade", action="store_true",
                       help="take the newest release of every package the .in allows (else "
                            "the current lock's versions are kept where they still fit)")
    moves.add_argument("--upgrade-package", action="append", default=[], metavar="NAME",
                       help="take the newest release of NAME only (repeatable)")
    moves.add_argument("--check", action="store_true",
                       help="write nothing; exit 1 when a lock is not what its .in resolves to "
                            "(versions, hashes, markers, indexes), naming the first difference")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..environments import locking

    try:
        targets = locking.targets(args.images)
    except locking.LockError as exc:
        raise UsageError(f"runner lock: {exc}") from None
    if not targets:
        raise UsageError("runner lock: no image folder with a requirements.in under images/")
    failed = 0
    for target in targets:
        started = time.monotonic()

        def note(line: str, target: locking.Target = target) -> None:
            console.print(f"[yellow]![/] {escape(target.label)}: {escape(line)}", soft_wrap=True)

        request = locking.request_for(target, args.upgrade, tuple(args.upgrade_package))
        try:
            text = locking.compile_lock(request, note)
        except locking.LockError as exc:
            console.print(f"[red]✗[/] {escape(target.label)}: {escape(str(exc))}", soft_wrap=True)
            failed += 1
            continue
        took = f"{time.monotonic() - started:.0f} s"
        changed = locking.differences(request.prefer, text)
        header = locking.header_note(request.prefer, text)
        if args.check and header and not changed:
            note(f"{header} (the pins match)")
        if args.check:
            failed += bool(changed)
            mark = "[red]✗[/]" if changed else "[green]✓[/]"
            more = f" (and {len(changed) - 1} more difference(s))" if len(changed) > 1 else ""
            said = f"differs from what {target.source.name} resolves to: {changed[0]}{more}" \
                if changed else f"matches {target.source.name}"
            console.print(f"{mark} {escape(target.label)} {escape(said)} ({took})", soft_wrap=True)
            continue
        if request.prefer != text:
            locking.write_lock(target, text)
        said = "; ".join(changed) if changed else "unchanged"
        console.print(f"[green]✓[/] {escape(target.label)}: {escape(said)} ({took})",
                      soft_wrap=True)
    if failed and args.check:
        console.print(f"{failed} lock(s) out of date: python -m runner lock "
                      f"{' '.join(args.images)}".rstrip(), soft_wrap=True)
    return EXIT_FAILED_CELLS if failed else EXIT_OK
