"""`python -m runner prices show|check|import`: the price tables a [cost] table reads
(runner/cost/). Offline: `import` reads a SkyPilot catalog folder already on this machine.

Exit codes: 0 done; 2 a table or catalog that cannot be used (one line, nothing written)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from rich.console import Console

from ..errors import EXIT_OK, UsageError, user_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                parser_class=type(parser))
    show = sub.add_parser("show", help="the rows of a price table (default: the shipped one)")
    show.add_argument("table", type=Path, nargs="?", default=None, metavar="FILE",
                      help="a price table (default: the one shipped with the runner)")
    show.add_argument("--accelerator", metavar="NAME", default=None,
                      help="only VMs with this GPU (A100, A100-80GB, H100, H200, …)")
    show.add_argument("--provider", metavar="NAME", default=None,
                      help="only this provider's VMs (aws, gcp, azure, …)")
    check = sub.add_parser("check", help="check a price table: its columns, prices and dates")
    check.add_argument("table", type=Path, nargs="?", default=None, metavar="FILE",
                       help="a price table (default: the one shipped with the runner)")
    imp = sub.add_parser("import", help="make a price table from a SkyPilot catalog folder "
                                        "(schema v7 or v8) already on this machine")
    imp.add_argument("folder", type=Path, metavar="DIR",
                     help="the catalog folder, e.g. ~/.sky/catalogs/v8 (one vms.csv per cloud)")
    imp.add_argument("-o", "--output", type=Path, default=Path("prices.csv"), metavar="FILE",
                     help="the table to write (default: prices.csv here); a matrix's [cost] "
                          "price_table names it")
    imp.add_argument("--date", type=_date, default=None, metavar="YYYY-MM-DD",
                     help="when the catalog was retrieved (default: each vms.csv's date)")


def _date(text: str) -> datetime.date:
    try:
        date = datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from None
    if date > datetime.date.today():
        raise argparse.ArgumentTypeError(f"{text} is in the future (the day the catalog was "
                                         "retrieved: today or before)")
    return date


def main(args: argparse.Namespace, console: Console) -> int:
    from ..cost import prices

    try:
        if args.action == "import":
            return import_catalog(args.folder, args.output, args.date, console)
        table = prices.read_table(args.table or prices.SHIPPED)
    except prices.PriceError as exc:
        raise UsageError(str(exc)) from None
    if args.action == "check":
        console.print(f"[green]✓[/] {user_text(describe(table))}", soft_wrap=True,
                      highlight=False)
    else:
        show_table(table, args.accelerator, args.provider, console)
    warn_if_stale(table, console)
    return EXIT_OK


def describe(table) -> str:
    return (f"{table.path}: {len(table.rows)} rows, {', '.join(table.providers())}; retrieved "
            f"{table.retrieved_at}; sha256 {table.sha256[:12]}")


def warn_if_stale(table, console: Console) -> None:
    from ..cost.prices import stale_note

    note = stale_note(table.retrieved_at)
    if note:
        console.print(f"[yellow]! {user_text(note)}[/]", soft_wrap=True, highlight=False)


def show_table(table, accelerator: str | None, provider: str | None, console: Console) -> None:
    from rich import box
    from rich.table import Table

    rows = [r for r in table.rows
            if (accelerator is None or r.accelerator.lower() == accelerator.lower())
            and (provider is None or r.provider == provider.lower())]
    if not rows:
        raise UsageError(f"{table.path}: no row for "
                         f"{' '.join(x for x in (provider, accelerator) if x)}")
    console.print(user_text(describe(table)), soft_wrap=True, highlight=False)
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    dated = len({r.retrieved_at for r in rows}) > 1      # else the line above says when
    columns = (("provider", "left"), ("instance", "left"), ("GPUs", "left"), ("region", "left"),
               ("$/h", "right"), ("spot $/h", "right"), ("$/GPU-h", "right"))
    for name, justify in columns + ((("retrieved", "left"),) if dated else ()):
        out.add_column(name, justify=justify, no_wrap=True)   # type: ignore[arg-type]
    for r in rows:
        out.add_row(user_text(r.provider), user_text(r.instance),
                    user_text(f"{r.count} × {r.accelerator}" if r.accelerator else "–"),
                    user_text(r.region), f"{r.price:.2f}",
                    f"{r.spot:.2f}" if r.spot is not None else "–",
                    f"{r.price / max(1, r.count):.2f}",
                    *([r.retrieved_at.isoformat()] if dated else []))
    out.caption = "list prices in USD per hour of the whole VM (sources: the table's Source column)"
    console.print(out)


def import_catalog(folder: Path, output: Path, date: datetime.date | None,
                   console: Console) -> int:
    from ..cost import prices, skypilot
    from ..worker.protocol import write_text_atomic

    rows = skypilot.read_catalog(folder.expanduser(), date)
    text = prices.table_csv(rows)
    prices.parse_rows(text, str(output))             # what it writes reads back
    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise UsageError(f"{output}: cannot be written ({exc.strerror or exc})") from None
    providers = sorted({r.provider for r in rows})
    console.print(f"[green]✓[/] {user_text(str(output))}: {len(rows)} GPU VMs of "
                  f"{', '.join(providers)} from {user_text(str(folder))}; use it with "
                  f"price_table = {user_text(repr(str(output)))} in the matrix's [cost]",
                  soft_wrap=True, highlight=False)
    return EXIT_OK
