"""Where the checkout's folders are, named once: the repository (the runner package the
executors mount or stage, .ci/), the image folders (images/<name>/: requirements, locks, the
Dockerfile) and the default results folder (results/<name>/<timestamp>/, history.sqlite)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"
RESULTS_DIR = REPO_ROOT / "results"


def folder_in_run(root: Path, *parts: str) -> Path:
    """root/parts… as a folder the runner writes into: each part made where it is missing, none
    of them a symbolic link (a run folder holds none: a write through one could land anywhere,
    outside the run). UsageError naming the link otherwise."""
    from .errors import UsageError

    path = Path(root)
    for part in parts:
        path = path / part
        try:
            path.mkdir()
        except FileExistsError:
            pass
        if path.is_symlink():
            raise UsageError(f"{path}: is a symbolic link; a run folder holds none (it could "
                             "point anywhere)")
        if not path.is_dir():
            raise UsageError(f"{path}: is not a folder")
    return path
