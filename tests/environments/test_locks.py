"""Every lock installs from public indexes alone: PyPI, and the indexes the lock itself declares
(runner/environments/indexes.py) — never from one machine's disk.

The static checks need no network and fail a lock that pins a build PyPI cannot carry (a local
version, torch==2.13.0+cpu) without naming its index. The installs resolve the locks with pip
and uv told to ignore this machine's configuration (its wheel folder, its local indexes): PyPI,
plus a loopback stand-in for each declared index this machine cannot reach (PyPI takes no local
versions; here PyTorch's CPU index is out of reach, so the stand-in serves the copy of the file
this machine's pip finds, which the lock's hash checks).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from runner.environments import indexes, installed, locking, venvs
from runner.environments.images import pip_settings
from runner.paths import IMAGES_DIR

LOCKS = sorted(IMAGES_DIR.glob("*/requirements*.lock"))
PYPI = "https://pypi.org/simple"


def source_of(lock: Path) -> Path:
    return lock.with_suffix(".in")


# --- what a lock says (no network) ------------------------------------------------------------------

@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lock_names_the_index_of_every_build_pypi_does_not_carry(lock):
    text = lock.read_text(encoding="utf-8")
    local = indexes.local_version_pins(lock)
    declared = indexes.declared(lock)
    assert declared or not local, f"{lock.name} pins {local} but names no index that carries them"
    for url in declared:
        assert url.startswith("https://") and urlparse(url).hostname not in (
            "localhost", "127.0.0.1"), f"{lock.name}: {url} is no public index"
    # Only extra indexes: pip lets a requirements file's --index-url replace the index a machine
    # is configured with (its mirror), so PyPI stays the installer's default.
    assert not re.search(r"^\s*(--index-url|-i)\b", text, re.M), lock.name
    assert not re.search(r"^\s*(--find-links|-f|--no-index)\b", text, re.M), lock.name
    assert not re.search(r"@\s*(file:|/)", text), f"{lock.name} points at a file on some disk"
    assert indexes.declared(source_of(lock)) == declared, \
        f"{source_of(lock).name} and {lock.name} name different indexes (recompile the lock)"


def test_the_cpu_torch_lock_names_pytorchs_cpu_index():
    lock = IMAGES_DIR / "torch" / "requirements.lock"
    assert indexes.local_version_pins(lock) == {"torch": "2.13.0+cpu"}
    assert indexes.declared(lock) == ["https://download.pytorch.org/whl/cpu"]
    # made by runner lock, which carries the index line and takes the best match across indexes
    assert locking.command_of(lock.read_text()) == \
        locking.command_line("requirements.in", indexed=True, excludes=True)


def test_a_lock_that_names_no_index_for_a_local_build_is_refused(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("torch==2.13.0+cpu \\\n    --hash=sha256:" + "0" * 64 + "\n")
    assert indexes.local_version_pins(lock) and not indexes.declared(lock)


# --- the builders read it ----------------------------------------------------------------------------

class StandIn:
    """`python -m http.server` on a loopback port, serving a folder."""

    def __init__(self, root: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
             "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and self.process.poll() is None
                time.sleep(0.1)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def serve():
    started: list[StandIn] = []

    def start(root: Path) -> StandIn:
        started.append(StandIn(root))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def test_an_index_this_machine_cannot_reach_is_left_to_its_pip_configuration(tmp_path, serve):
    (tmp_path / "index").mkdir()
    here = serve(tmp_path / "index").url("/simple")
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"--extra-index-url {here}\n--extra-index-url https://no-such-index.invalid/"
                    "whl\nnumpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    (tmp_path / "copy").mkdir()
    usable, notes = indexes.usable_lock(lock, tmp_path / "copy")
    assert usable != lock and indexes.declared(usable) == [here]
    [note] = notes
    assert note.startswith("https://no-such-index.invalid/whl cannot be reached from here "
                           "(no-such-index.invalid does not resolve)")
    assert usable.read_text().endswith(lock.read_text().split("whl\n", 1)[1])
    env = venvs.env_for("numpy", "cpu", tmp_path)
    pip = venvs.installer_command(env, usable, machine_config=True)
    assert pip[1:4] == ["-m", "pip", "install"] and pip[-1] == str(usable)
    lock.write_text(f"--extra-index-url {here}\nnumpy==2.4.6\n")
    assert indexes.usable_lock(lock, tmp_path / "copy") == (lock, [])


def test_uv_takes_the_best_match_across_declared_indexes(tmp_path):
    if venvs.find_uv() is None:
        pytest.skip("uv is not installed")
    torch = venvs.env_for("torch", "cpu", tmp_path)
    command = venvs.installer_command(torch)
    assert command[1:3] == ["pip", "install"]
    assert command[command.index("--index-strategy") + 1] == "unsafe-best-match"
    numpy = venvs.installer_command(venvs.env_for("numpy", "cpu", tmp_path))
    assert "--index-strategy" not in numpy      # PyPI alone: uv's default


def test_the_image_build_takes_the_hosts_pip_urls_not_its_paths(monkeypatch):
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels http://127.0.0.1:8000/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    assert pip_settings() == {"PIP_FIND_LINKS": "http://127.0.0.1:8000/", "PIP_RETRIES": "0"}
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    assert pip_settings() == {"PIP_RETRIES": "0"}


# --- resolved against PyPI and the declared indexes alone (slow: PyPI over the network) --------------

def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any setting that points pip or uv at this machine's
    own indexes or wheel folders (the TLS settings stay)."""
    drop = re.compile(r"^(PIP|UV)_(INDEX_URL|EXTRA_INDEX_URL|FIND_LINKS|NO_INDEX|CONSTRAINT|"
                      r"CONFIG_FILE|INDEX|DEFAULT_INDEX|OFFLINE)$")
    env = {k: v for k, v in os.environ.items() if not drop.match(k)}
    return {**env, "PIP_CONFIG_FILE": os.devnull, **extra}


@pytest.fixture
def public_lock(tmp_path, serve):
    """public_lock(lock) -> a copy of the lock whose declared indexes this machine cannot reach
    are loopback stand-ins serving the lock's files of that index (copies this machine's pip
    finds, checked by the lock's hashes); skips when PyPI is out of reach."""
    if indexes.unreachable(PYPI + "/"):
        pytest.skip(f"PyPI ({PYPI}) cannot be reached from here")

    def make(lock: Path) -> Path:
        text = lock.read_text(encoding="utf-8")
        for url in indexes.declared(lock):
            if not indexes.unreachable(url):
                continue
            root = tmp_path / f"standin-{len(list(tmp_path.glob('standin-*')))}"
            fetch_local_builds(lock, root / urlparse(url).path.strip("/"))
            text = text.replace(url, serve(root).url(urlparse(url).path))
        copy = tmp_path / f"{lock.parent.name}-{lock.name}"
        copy.write_text(text, encoding="utf-8")
        return copy

    return make


def fetch_local_builds(lock: Path, folder: Path) -> None:
    """The lock's local-version files as this machine's pip finds them (its wheel folder here),
    laid out as a simple index: folder/<name>/<file>."""
    text = lock.read_text(encoding="utf-8")
    for name, version in indexes.local_version_pins(lock).items():
        entry = re.search(rf"^{re.escape(name)}=={re.escape(version)}(?:\s*\\\n\s*--hash=\S+)+",
                          text, re.M).group(0)
        wanted = folder.parent / f"{name}.txt"
        folder.mkdir(parents=True, exist_ok=True)
        wanted.write_text(entry + "\n", encoding="utf-8")
        target = folder / name
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                              "--require-hashes", "--disable-pip-version-check", "-q",
                              "-d", str(target), "-r", str(wanted)],
                             capture_output=True, text=True, timeout=600)
        if got.returncode != 0:
            pytest.skip(f"{name}=={version}: its index cannot be reached from here and this "
                        f"machine keeps no copy ({got.stderr.strip().splitlines()[-1:]})")


@pytest.mark.slow
@pytest.mark.parametrize("image", ["numpy", "torch"])
def test_pip_downloads_every_file_of_the_lock_by_its_hash(image, public_lock, tmp_path):
    lock = IMAGES_DIR / image / "requirements.lock"
    usable = public_lock(lock)

    def download(requirements: Path, into: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
             "--only-binary", ":all:", "--python-version", "3.11", "--disable-pip-version-check",
             "--index-url", PYPI, "-d", str(tmp_path / into), "-r", str(requirements)],
            capture_output=True, text=True, env=clean_env(), timeout=900)

    done = download(usable, "files")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(list((tmp_path / "files").iterdir())) == len(installed.lock_pins(lock))
    if indexes.local_version_pins(lock):
        # The same lock without the index it names: the build PyPI cannot carry is not found.
        bare = tmp_path / "bare.lock"
        bare.write_text("".join(line for line in usable.read_text().splitlines(keepends=True)
                                if not indexes.INDEX_LINE.match(line)))
        missing = download(bare, "bare")
        assert missing.returncode != 0
        assert "No matching distribution found for torch==2.13.0+cpu" in missing.stderr


@pytest.mark.slow
def test_uv_resolves_every_lock_from_pypi_and_its_declared_indexes(public_lock, tmp_path):
    uv = venvs.find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    for lock in LOCKS:
        usable = public_lock(lock)
        strategy = ["--index-strategy", "unsafe-best-match"] if indexes.declared(usable) else []
        target = tmp_path / "target"
        shutil.rmtree(target, ignore_errors=True)
        done = subprocess.run(
            [uv, "pip", "install", "--dry-run", "--no-config", "--no-deps", "--require-hashes",
             "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
             "--target", str(target), "--index-url", PYPI, *strategy, "-r", str(usable)],
            capture_output=True, text=True, env=clean_env(), timeout=600)
        assert done.returncode == 0, f"{lock}: {done.stderr[-1500:]}"
