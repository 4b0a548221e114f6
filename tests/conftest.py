"""Shared fixtures: matrices written to a temporary folder, the CLI run in-process."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from runner import cli

ENVIRONMENTS = """
[environments.numpy]
image = "numpy"
api = "numpy"

[environments.keras-jax]
image = "jax"
api = "keras"
backend = "jax"
"""


@pytest.fixture
def write_matrix(tmp_path):
    """write_matrix(text, with_environments=True) -> path of a matrix file in tmp_path."""

    def write(text: str, with_environments: bool = True, name: str = "matrix.toml") -> Path:
        body = textwrap.dedent(text)
        if with_environments:
            body = textwrap.dedent(ENVIRONMENTS) + body
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        return path

    return write


@pytest.fixture
def results_dir(tmp_path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


@pytest.fixture
def run_cli(capsys, results_dir):
    """run_cli(*args) -> (exit code, stdout, stderr), with results under a temporary folder."""

    def run(*args: str, results: Path | None = None) -> tuple[int, str, str]:
        argv = list(map(str, args))
        if argv and argv[0] not in ("report",):
            argv += ["--results-dir", str(results or results_dir)]
        code = cli.main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return run


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--hide-scrollbars"]


@pytest.fixture
def chromium(tmp_path):
    """chromium(*args) -> stdout: Debian's chromium, headless, offline, a fresh profile (tests
    marked `browser`; `bash .ci/history-setup.sh` installs it)."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("no chromium (bash .ci/history-setup.sh installs Debian's chromium)")
    profile = tmp_path / "chromium-profile"

    def run(*args: str) -> str:
        done = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    return run


@pytest.fixture
def pypi():
    """Skips unless PyPI answers and uv is installed: what resolving a lock needs."""
    from runner.environments import indexes, venvs

    if indexes.unreachable("https://pypi.org/simple/"):
        pytest.skip("PyPI cannot be reached from here (locks are resolved there)")
    if venvs.find_uv() is None:
        pytest.skip("uv is not installed")
