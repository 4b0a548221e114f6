"""Shared fixtures: matrices written to a temporary folder, the CLI run in-process, headless
Chromium, PyPI, and the real Docker engine with the numpy image built on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import tomli_w

from runner import settings
from runner import cli
from runner.environments import images
from runner.paths import REPO_ROOT
from tests.matrices import environment


ENGINE_GROUP = "docker-engine"

# The framework processes the tests start themselves (the keras-hub, layer, CNN and quantized
# modules run their cells in one worker process each, inheriting this environment) compile XLA
# without LLVM's optimisation passes: the answers are the same within the precision's tolerance,
# which is all those tests check, and the keras-hub models' cells on JAX took 61 s instead of
# 109 s (2026-11-28, this 2-core VM). Runs through the runner never see it: a worker gets the
# host's variables only where DL_BENCH_INHERIT_ENV names them. A value already set is kept.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

# pytest-xdist starts its workers with COLUMNS=80 (a probe, 2026-11-28: a worker reads COLUMNS
# "80", a plain run none), and the CLI keeps a COLUMNS it is given rather than its 100-column
# log width (cli.py): 18 tests that read the plan's table failed on two workers only. A worker
# drops it, so a test sees the width it sees in one process; a test that wants one sets it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)


def uses_the_engine(test_file: Path) -> bool:
    """A test file with a docker test (marked in the file itself)."""
    text = test_file.read_text(encoding="utf-8") if test_file.is_file() else ""
    return "mark.docker" in text


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:            # pytest-xdist is in the test extra; without it nothing is split
    pass
else:
    class ModuleOrEngineScheduling(LoadScopeScheduling):
        """`--dist loadscope`, the README's second half on three workers: each test module is
        one unit of work, so the framework run its tests share (a module-scoped fixture) is
        made once; every module with a Docker test is one unit together, so those run one at
        a time on one worker (they time containers against engine timeouts and share the
        engine's disk and images) while the other workers run the rest. A module holds a
        Docker test only where it must: the local runs and the Ray cluster's tests beside
        them would make that one worker the stage's longest path (2026-11-29: its modules
        took 1 130 s of a 1 378 s stage, the Ray module 286 s and a local example 105 s of
        it). (pytest-xdist's own loadgroup marks no longer reach its scheduler under pytest
        9.2.)"""

        def __init__(self, config: pytest.Config, log=None) -> None:
            super().__init__(config, log)
            self.rootpath = config.rootpath
            self.engine_files: dict[str, bool] = {}

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in self.engine_files:
                self.engine_files[path] = uses_the_engine(self.rootpath / path)
            return ENGINE_GROUP if self.engine_files[path] else path

    def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling | None:
        return ModuleOrEngineScheduling(config, log) if config.getvalue("dist") == "loadscope" \
            else None


# write_matrix's environments unless told otherwise; the blank line first keeps the line
# numbers a parse error names where they were.
ENVIRONMENTS = "\n" + tomli_w.dumps(
    {"environments": {name: environment(name) for name in ("numpy", "keras-jax")}})


@pytest.fixture
def write_matrix(tmp_path):
    """write_matrix(text, with_environments=True) -> path of a matrix file in tmp_path. A text
    from tests.matrices.matrix_text declares its environments: with_environments=False."""

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


# --- the Docker tests' engine: one for the session, shared by every folder ---------------------
# The engine comes from .ci/docker-setup.sh (docker.io, dockerd on overlay2, else on vfs, the base
# image imported); every fixture here skips, saying why, when no engine can be had.

DOCKER_BASE = os.environ.get("DOCKER_TEST_BASE", "dl-bench-base:bookworm")
DOCKER_SETUP = REPO_ROOT / ".ci" / "docker-setup.sh"


@pytest.fixture(scope="session")
def engine():
    """A docker SDK client on a running engine that has the local base image, or a skip."""
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed "
                                                  "(pip install .[docker])")
    from runner.environments.docker_engine import DockerUnavailable, connect

    try:
        client = connect(timeout=120)
        ready = bool(client.images.list(name=DOCKER_BASE))
    except DockerUnavailable:
        client, ready = None, False
    if not ready:
        if os.environ.get("DL_BENCH_NO_DOCKER_SETUP"):
            pytest.skip("no Docker engine with the base image, and DL_BENCH_NO_DOCKER_SETUP is set")
        setup = subprocess.run(["sh", str(DOCKER_SETUP)], capture_output=True, text=True,
                               timeout=900, env={**os.environ, "DOCKER_TEST_BASE": DOCKER_BASE})
        last = (setup.stdout.strip().splitlines() or ["no output"])[-1]
        try:
            client = connect(timeout=120)
            client.images.get(DOCKER_BASE)
        except (DockerUnavailable, docker.errors.DockerException):
            pytest.skip(f"Docker unavailable: {last}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def numpy_image(engine):
    """The numpy image built FROM the local base (built once; later runs find it up to date)."""
    rec = images.recipe("numpy", "cpu", base=DOCKER_BASE)
    lines: list[str] = []
    started = time.monotonic()
    image, _ = images.ensure(engine, rec, lines.append)
    print(f"numpy image ready in {time.monotonic() - started:.0f} s")
    return rec, image


@pytest.fixture
def base_env(monkeypatch):
    monkeypatch.setenv(settings.BASE_IMAGE, DOCKER_BASE)
    monkeypatch.setenv(settings.FLAVOUR, "cpu")


@pytest.fixture
def docker_base() -> str:
    """The local base image every test image is built FROM (DOCKER_TEST_BASE)."""
    return DOCKER_BASE
