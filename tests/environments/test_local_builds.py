"""Local builds (runner/environments/local_builds.py): a pin naming a wheel file or a source tree
is locked by its content — the hash moves when a file changes, not when it is touched; a dirty
git tree hashes its uncommitted changes — and resolved into a derived lock that pins the cached
wheel by its sha256.

The hashes need no network; the resolutions ask PyPI (uv: marked slow, skipped when PyPI is out
of reach), the tree's build its build backend too."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from runner.environments import installed, local_builds, stacks, venvs


def write_tree(root: Path, value: int = 1) -> Path:
    """A tiny pure-Python project (setuptools), `dlbench-probe` 0.1.0."""
    (root / "dlbench_probe").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "dlbench-probe"\nversion = "0.1.0"\n')
    (root / "dlbench_probe" / "__init__.py").write_text(f"VALUE = {value}\n")
    return root


def write_wheel(path: Path, value: int = 1) -> Path:
    """A wheel of `dlbench-probe` 0.1.0 made by hand (no build backend)."""
    info = "dlbench_probe-0.1.0.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("dlbench_probe/__init__.py", f"VALUE = {value}\n")
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: dlbench-probe\n"
                                           "Version: 0.1.0\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                        "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def touch_later(path: Path) -> None:
    stat = path.stat()
    os.utime(path, (stat.st_atime + 100, stat.st_mtime + 100))


def git(tree: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def test_a_plain_trees_hash_moves_when_a_file_changes_not_when_it_is_touched(tmp_path):
    tree = write_tree(tmp_path / "probe")
    first, said, files = local_builds.tree_sha256(tree)
    assert said == "" and files == ["dlbench_probe/__init__.py", "pyproject.toml"]
    touch_later(tree / "dlbench_probe" / "__init__.py")
    (tree / "build" / "lib").mkdir(parents=True)                   # build output: not source
    (tree / "build" / "lib" / "x.py").write_text("x")
    (tree / "dlbench_probe" / "__pycache__").mkdir()
    (tree / "dlbench_probe" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert local_builds.tree_sha256(tree)[0] == first
    (tree / "dlbench_probe" / "__init__.py").write_text("VALUE = 2\n")
    assert local_builds.tree_sha256(tree)[0] != first
    (tree / "dlbench_probe" / "__init__.py").write_text("VALUE = 1\n")
    assert local_builds.tree_sha256(tree)[0] == first              # the content, not the edit


def test_a_dirty_git_tree_hashes_its_changes_and_says_so(tmp_path):
    tree = write_tree(tmp_path / "probe")
    (tree / ".gitignore").write_text("*.log\n")
    git(tree, "init", "-q")
    git(tree, "add", ".")
    git(tree, "commit", "-q", "-m", "first")
    clean, said, _ = local_builds.tree_sha256(tree)
    assert said.startswith("git ") and "changed" not in said
    (tree / "run.log").write_text("ignored by git")                  # ignored: no part of it
    touch_later(tree / "pyproject.toml")
    assert local_builds.tree_sha256(tree)[0] == clean
    (tree / "dlbench_probe" / "__init__.py").write_text("VALUE = 2\n")   # uncommitted
    dirty, said, _ = local_builds.tree_sha256(tree)
    assert dirty != clean and said.endswith("+ 1 changed file")
    (tree / "dlbench_probe" / "extra.py").write_text("")            # untracked, not ignored
    untracked = local_builds.tree_sha256(tree)[0]
    assert untracked not in (clean, dirty)
    git(tree, "add", ".")
    git(tree, "commit", "-q", "-m", "second")
    committed, said, _ = local_builds.tree_sha256(tree)
    assert "changed" not in said and committed == untracked     # the same files: the same hash


def test_a_pin_of_a_wheel_of_another_distribution_is_refused(tmp_path):
    wheel = write_wheel(tmp_path / "dlbench_probe-0.1.0-py3-none-any.whl")
    with pytest.raises(local_builds.LocalBuildError, match="a wheel of dlbench-probe, not of keras"):
        local_builds.build("keras", wheel.name, tmp_path, tmp_path / "cache")
    with pytest.raises(local_builds.LocalBuildError, match="no such wheel file or source folder"):
        local_builds.build("keras", "../nowhere", tmp_path, tmp_path / "cache")


@pytest.fixture
def own_caches(tmp_path, monkeypatch):
    cache = tmp_path / "stack-cache"
    monkeypatch.setattr(stacks, "CACHE_ROOT", cache)
    monkeypatch.setattr(venvs, "ENV_ROOT", tmp_path / "envs")
    return cache


@pytest.mark.slow
def test_a_local_wheel_is_locked_by_its_content(pypi, own_caches, tmp_path):
    (tmp_path / "dist").mkdir()
    wheel = write_wheel(tmp_path / "dist" / "dlbench_probe-0.1.0-py3-none-any.whl")
    pin = "dlbench-probe @ dist/dlbench_probe-0.1.0-py3-none-any.whl"
    stack = stacks.resolve("numpy", "cpu", [pin], [], base=tmp_path)
    [build] = stack.builds
    sha = venvs.sha256_file(wheel)
    assert (build.origin, build.version, build.sha256) == ("local wheel", "0.1.0", sha)
    text = stack.lock.read_text()
    cached = own_caches / "wheels" / f"file-{sha[:16]}" / wheel.name
    assert f"dlbench-probe @ {cached.as_uri()} \\\n    --hash=sha256:{sha}" in text
    assert installed.lock_pins(stack.lock)["dlbench-probe"] == "0.1.0"
    assert stack.changes == (f"dlbench-probe @ dlbench-probe 0.1.0 (local wheel "
                             f"sha256:{sha[:12]})",)
    assert str(tmp_path) not in " ".join(stack.changes)            # its content, never its path
    touch_later(wheel)
    assert stacks.resolve("numpy", "cpu", [pin], [], base=tmp_path) == stack
    write_wheel(wheel, value=2)
    assert stacks.resolve("numpy", "cpu", [pin], [], base=tmp_path).sha256 != stack.sha256


@pytest.mark.slow
def test_a_source_tree_is_built_once_per_content(pypi, own_caches, tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "probe")
    stack = stacks.resolve("numpy", "cpu", ["dlbench-probe @ probe"], [], base=tmp_path)
    [build] = stack.builds
    assert (build.origin, build.version) == ("local tree", "0.1.0")
    assert build.sha256 == local_builds.tree_sha256(tree)[0]
    assert not (tree / "build").exists()            # built from a copy: the checkout is left alone
    assert "dlbench-probe @ file://" in stack.lock.read_text()

    def no_build(*args):
        raise AssertionError("built again")

    monkeypatch.setattr(local_builds, "build_wheel", no_build)
    touch_later(tree / "dlbench_probe" / "__init__.py")
    assert stacks.resolve("numpy", "cpu", ["dlbench-probe @ probe"], [], base=tmp_path) == stack
    monkeypatch.undo()
    monkeypatch.setattr(stacks, "CACHE_ROOT", own_caches)
    (tree / "dlbench_probe" / "__init__.py").write_text("VALUE = 2\n")
    edited = stacks.resolve("numpy", "cpu", ["dlbench-probe @ probe"], [], base=tmp_path)
    assert edited.builds[0].sha256 != build.sha256 and edited.sha256 != stack.sha256
