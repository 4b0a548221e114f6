"""`python -m runner import FILE`: check an archive of `runner export` against its checksum,
load its images, check their lock and recipe labels against this checkout. Exit 0 when every
image loaded and matches, 1 when some loaded image does not (reproduce can still run it by id),
2 for a bad archive."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError, user_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("archive", type=Path, help="an archive written by python -m runner export")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..environments import images, transfer
    from ..studies.reproduce import docker_client

    def recipe_for(name: str, flavour: str) -> images.Recipe | None:
        try:
            return images.recipe(name, flavour)
        except images.ImageError:
            return None

    try:
        transfer.verify(args.archive)      # a damaged or missing file is told before the engine,
        transfer.read_index(args.archive)  # ... and so is a malformed index
        client = docker_client()
        try:
            loaded = transfer.import_images(client, args.archive, lambda line: None, recipe_for)
        finally:
            client.close()
    except transfer.TransferError as exc:
        raise UsageError(str(exc)) from None
    for item in loaded:
        tags = " ".join(item.tags) or item.image_id[:19]
        if item.problems:
            console.print(f"[yellow]! {user_text(item.key)}: loaded {user_text(tags)}, but "
                          f"{user_text('; '.join(item.problems))}[/]", soft_wrap=True)
        else:
            console.print(f"[green]✓[/] {user_text(item.key)}: loaded {user_text(tags)}; lock "
                          "and recipe labels match this checkout", soft_wrap=True)
    return EXIT_FAILED_CELLS if any(item.problems for item in loaded) else EXIT_OK
