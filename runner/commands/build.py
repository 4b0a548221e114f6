"""`python -m runner build MATRIX`: prepare every environment the matrix needs (images or local
environments), run nothing; with --push, push each built image and record the digests that name
them (results/<name>/images.json)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..errors import EXIT_FAILED_CELLS, UsageError, user_text
from ..executors import kinds
from ..executors.base import as_image_executor
from .options import add_matrix_options, run_options
from ..timestamps import iso_now

if TYPE_CHECKING:
    from ..run.pipeline import RunState

REGISTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_matrix_options(parser)
    parser.add_argument("--push", metavar="REGISTRY", default=None,
                        help="push each built image to REGISTRY (HOST[:PORT]) and record the "
                             "digest that names it (results/<name>/images.json)")


def main(args: argparse.Namespace, console: Console) -> int:
    from ..run import pipeline

    opts = run_options(args, push=args.push)
    if opts.push is not None:
        if not REGISTRY.match(opts.push):
            raise UsageError(f"--push {opts.push!r}: expected a registry as HOST[:PORT][/PATH] "
                             "(no scheme), e.g. 127.0.0.1:5000")
        if opts.executor is not None and not kinds.runs_images(opts.executor):
            raise UsageError(f"--push pushes Docker images: it needs --executor "
                             f"{kinds.IMAGE_KIND}, not {opts.executor}")
        opts.executor = opts.executor or kinds.IMAGE_KIND
    steps = (pipeline.load_matrix, pipeline.plan_cells, pipeline.resolve_stacks,
             pipeline.choose_sources, show_what_builds, pipeline.prepare_environments, stop_if_a_build_failed,
             push_images)
    return pipeline.execute(steps, pipeline.RunState(opts, console))


def show_what_builds(state: RunState) -> None:
    from ..run.console import show_preparation, show_setup

    show_setup(state.matrix, state.setup, state.plan.cells, state.console)
    show_preparation(state.matrix, state.setup, state.plan, [], state.console, action="builds")


def stop_if_a_build_failed(state: RunState) -> int | None:
    return EXIT_FAILED_CELLS if any(p.error for p in state.progress.prepared.values()) else None


def push_images(state: RunState) -> int | None:
    """Push the images of the image folders to --push and write the digests that name them
    to <results-dir>/<name>/images.json (environment -> reference, lock, recipe, image id)."""
    from ..environments import images

    opts, matrix, console = state.opts, state.matrix, state.console
    if opts.push is None:
        return None
    pushed: dict[str, dict[str, Any]] = {}
    ok = True
    for source in state.sources:
        if source.existing or source.by_digest:
            continue
        try:
            pushed[source.key] = as_image_executor(state.setup.executor).push(source, opts.push)
        except images.ImageError as exc:
            console.print(f"[red]✗ {user_text(str(exc))}[/]", soft_wrap=True)
            ok = False
            continue
        console.print(f"[green]✓[/] pushed {user_text(source.key)}: "
                      f"{user_text(pushed[source.key]['image'])}", soft_wrap=True)
    target = opts.results_dir / matrix.spec.run.name / "images.json"
    earlier = read_pushed(target)
    if pushed:
        write_pushed(target, earlier, opts.push, matrix, pushed)
        console.print(f"digests: {user_text(str(target))} (an environment runs exactly its "
                      f"image with image = \"REGISTRY/NAME@sha256:…\")", soft_wrap=True)
    return None if ok else EXIT_FAILED_CELLS


def write_pushed(target: Path, earlier: dict[str, Any], registry: str, matrix: Any,
                 pushed: dict[str, dict[str, Any]]) -> None:
    """images.json: this push's environments, over earlier pushes' to the same registry."""
    from ..worker.protocol import write_json_atomic

    same_registry = earlier.get("registry") == registry
    environments = dict(earlier.get("environments", {})) if same_registry else {}
    environments |= {name: pushed[env.image] for name, env in matrix.spec.environments.items()
                     if env.image in pushed}
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target, {
        "schema": 1, "registry": registry, "matrix": str(matrix.path),
        "pushed_at": iso_now(),
        "environments": environments})


def read_pushed(target: Path) -> dict[str, Any]:
    """images.json of earlier pushes ({} when there is none); UsageError when it is damaged."""
    if not target.is_file():
        return {}
    try:
        earlier = json.loads(target.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{target}: not valid JSON ({type(exc).__name__}); move it away to "
                         "start a new one") from None
    if not isinstance(earlier, dict) or not isinstance(earlier.get("environments", {}), dict):
        raise UsageError(f"{target}: not an images.json of python -m runner build --push")
    return earlier
