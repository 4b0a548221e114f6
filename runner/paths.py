"""Where the checkout's folders are, named once: the repository (the runner package the
executors mount or stage, .ci/), the image folders (images/<name>/: requirements, locks, the
Dockerfile) and the default results folder (results/<name>/<timestamp>/, history.sqlite)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"
RESULTS_DIR = REPO_ROOT / "results"
