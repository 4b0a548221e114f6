"""`python -m runner report RUN_DIR`: rebuild the merged outputs of a run from its cell
records."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a run folder under results/")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run.console import show_results
    from ..results.data.store import Store
    from ..results.render.write import write_reports

    store = Store.open(args.run_dir, lock=False)
    manifest = store.read_manifest()
    report = write_reports(store, manifest)
    show_results(report, f"{manifest.get('name')} ({store.root})", store.root, console)
    return EXIT_OK
