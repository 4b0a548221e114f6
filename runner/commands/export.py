"""`python -m runner export MATRIX|RUN_DIR -o FILE`: the images a matrix needs (built when
missing, pulled when named by digest), or exactly the images a finished run used, in one archive
with a checksum (environments/transfer.py)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..errors import EXIT_OK, UsageError, user_text
from ..executors import kinds
from ..executors.base import as_image_executor
from .options import PROFILES

if TYPE_CHECKING:
    from ..run.pipeline import RunState


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", type=Path, metavar="MATRIX|RUN_DIR",
                        help="a matrix (the images it needs, built when missing) or a run "
                             "folder (exactly the images its cells ran in)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                        help="the archive to write (a tar; FILE.sha256 beside it)")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="only the environments of cells whose name matches PATTERN")
    parser.add_argument("--profile", choices=PROFILES, help="override [run] profile")


def main(args: argparse.Namespace, console: Console) -> int:
    """One archive (docker save) and its checksum file."""
    from ..run import pipeline
    from ..studies.reproduce import docker_client, is_run_folder

    if args.output.exists() and args.output.is_dir():
        raise UsageError(f"--output {args.output}: is a folder; give the archive's file name")
    if is_run_folder(args.source):
        client = docker_client()
        try:
            return write_archive(client, images_of_run(client, args.source), args.output,
                                 console)
        finally:
            client.close()
    opts = pipeline.Options(matrix_path=args.source, only=args.only, profile=args.profile,
                            executor=kinds.IMAGE_KIND)
    state = pipeline.RunState(opts, console)
    steps = (pipeline.load_matrix, pipeline.plan_cells, pipeline.resolve_stacks,
             pipeline.choose_sources, only_images, pipeline.prepare_environments,
             functools.partial(archive_prepared, output=args.output))
    return pipeline.execute(steps, state)


def only_images(state: RunState) -> None:
    """Existing interpreters have no image: said, and left out."""
    skipped = [s.python for s in state.sources if s.python is not None]
    if skipped:
        state.console.print(f"[yellow]! not exported (existing interpreters, no image): "
                            f"{user_text(', '.join(skipped))}[/]", soft_wrap=True)
    state.decide(sources=tuple(s for s in state.sources if not s.existing))
    if not state.sources:
        raise UsageError(f"{state.matrix.path}: no environment of it runs from an image")


def archive_prepared(state: RunState, output: Path) -> int:
    """The prepared images in one archive (exit 1 when one could not be prepared)."""
    from ..environments import transfer
    from .build import stop_if_a_build_failed

    failed = stop_if_a_build_failed(state)
    if failed is not None:
        return failed
    executor = as_image_executor(state.setup.executor)
    wanted = [transfer.Exported(s.key, executor.image(s.key)) for s in state.sources]
    return write_archive(executor.client(), wanted, output, state.console)


def images_of_run(client: Any, run_dir: Path) -> list[Any]:
    """Exactly the images a finished run used (by the image ids its records name)."""
    import docker.errors

    from ..environments import transfer
    from ..results.data.store import open_run

    store, _ = open_run(run_dir)
    used: dict[str, str] = {}
    for record in store.records():
        meta = record.get("metadata") or {}
        if meta.get("image_id"):
            used.setdefault(record["environment"], meta["image_id"])
    if not used:
        raise UsageError(f"{run_dir}: its cells ran in no image (a local run: its environments "
                         "are rebuilt from the locks, which reproduce checks by hash)")
    wanted: dict[str, Any] = {}
    for environment, image_id in used.items():
        try:
            wanted.setdefault(image_id, transfer.Exported(environment, client.images.get(image_id)))
        except docker.errors.ImageNotFound:
            raise UsageError(f"{run_dir}: environment {environment}: image {image_id[:19]} is "
                             "not on this engine") from None
    return list(wanted.values())


def write_archive(client: Any, wanted: list[Any], output: Path, console: Console) -> int:
    from ..environments import transfer

    index = transfer.export_images(client, wanted, output, lambda line: None)
    for entry in index["images"]:
        console.print(f"[green]✓[/] {user_text(entry['key'])}: {entry['image_id'][:19]} "
                      f"{user_text(' '.join(entry['tags']))}", soft_wrap=True)
    console.print(f"archive: {user_text(str(output))} ({output.stat().st_size / 1e6:.0f} MB), "
                  f"checksum: {user_text(str(transfer.checksum_path(output)))}", soft_wrap=True)
    return EXIT_OK
