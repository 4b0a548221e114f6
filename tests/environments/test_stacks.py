"""Derived stacks (runner/environments/stacks.py): an image folder's requirements with pins and
packages, resolved into a lock of its own exactly as the shipped locks are made; bad input is one
line with the resolver's reason, exit 2, before anything is built or written.

The resolutions ask PyPI (uv, over the network: marked slow, skipped when PyPI is out of reach);
NumPy's folder serves them, and the CUDA flavour of the torch folder for a newer torch (PyPI's
torch is the CUDA build; a CPU build other than the shipped one needs PyTorch's CPU index)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from runner import cli
from runner.environments import indexes, installed, locking, stacks, venvs
from runner.paths import IMAGES_DIR
from tests.matrices import environment, matrix_text

PINNED = environment("numpy", pins=["numpy==2.2.6"])


def stacks_matrix(derived: dict[str, dict[str, Any]]) -> str:
    """NumPy's shipped environment beside `derived` (name -> table), a tiny matmul on each."""
    return matrix_text("stacks", steps=2, executor="local",
                       environments={"numpy": environment("numpy"), **derived},
                       benchmarks=[{"workload": "matmul", "environments": ["*"], "size": "tiny"}])


# --- the derived .in (no network) ------------------------------------------------------------

def test_a_pin_replaces_its_requirement_keeping_extras_marker_and_which_build():
    torch_cpu = (IMAGES_DIR / "torch" / "requirements.in").read_text()
    derived = stacks.derive(torch_cpu, ["torch==2.15.0", "keras==3.16.0"], [], "x")
    lines = [line.split("    #")[0] for line in derived.splitlines()]
    assert "torch==2.15.0+cpu" in lines          # the CPU build, from the index the .in names
    assert "keras==3.16.0" in lines and "keras==3.15.1" not in lines
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    assert "torch==2.13.0+cpu" not in lines and "keras-hub==0.32.0" in lines
    jax_cuda = (IMAGES_DIR / "jax" / "requirements-cuda.in").read_text()
    assert "jax[cuda12]==0.10.1    # pinned by the matrix (was jax[cuda12]==0.10.2)" in \
        stacks.derive(jax_cuda, ["jax==0.10.1"], [], "x").splitlines()
    marked = stacks.derive("foo==1.0; sys_platform == 'linux'\n", ["foo==2.0"], [], "x")
    assert marked.startswith('foo==2.0; sys_platform == "linux"')
    exact = stacks.derive("torch==2.13.0+cpu\n", ["torch==2.15.0+cu130"], [], "x")
    assert exact.startswith("torch==2.15.0+cu130 ")     # a label given wins


def test_a_pin_of_a_dependency_and_a_package_are_added():
    derived = stacks.derive("numpy\npsutil\n", ["ml-dtypes==0.5.1"], ["einops==0.8.1"], "x")
    assert derived.splitlines() == ["numpy", "psutil", "ml-dtypes==0.5.1    # pinned by the matrix",
                                    "einops==0.8.1    # added by the matrix"]


def test_a_package_the_folder_already_asks_for_is_changed_with_a_pin():
    with pytest.raises(stacks.StackError, match=r"packages: NumPy is already in images/numpy/"
                       r"requirements.in; change its version with pins"):
        stacks.derive("numpy\n", [], ["NumPy>=2"], "images/numpy/requirements.in")


# --- the matrix (no network: refused before any resolution) ------------------------------------

@pytest.mark.parametrize("derived, message", [
    ({"pins": ["numpy"]}, "environments.numpy-derived: pins[0]: 'numpy' gives no version: pin it "
                          "as numpy==VERSION"),
    ({"pins": ["numpy==2.2.6"], "packages": ["NumPy"]},
     "environments.numpy-derived: packages[0]: NumPy is already in pins: name each distribution "
     "once"),
    ({"pins": ["numpy==2.2.6", "numpy==2.3.0"]}, "pins[1]: numpy is already in pins"),
    ({"packages": ["numpy @ https://example.org/numpy.whl"]}, "a URL is no release of an index"),
    ({"packages": ["not a requirement!"]}, "packages[0]: 'not a requirement!' is not a requirement"),
], ids=["unpinned", "pinned-and-packaged", "pinned-twice", "url", "not-a-requirement"])
def test_a_stack_that_is_no_stack_is_refused_by_the_schema(derived, message, write_matrix, run_cli,
                                                            results_dir):
    path = write_matrix(stacks_matrix({"numpy-derived": environment("numpy", **derived)}),
                        with_environments=False)
    code, out, err = run_cli("plan", path)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not any(results_dir.iterdir())


def test_pins_need_an_image_folder_that_exists(write_matrix, run_cli):
    text = stacks_matrix({"numpy-derived": {**PINNED, "image": "numpi"}})
    code, _, err = run_cli("plan", write_matrix(text, with_environments=False))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "environments.numpy-derived.image: no folder images/numpi to derive a stack from " \
           "(did you mean 'numpy'?)" in err
    python = stacks_matrix({"numpy-derived": {"python": "/usr/bin/python3", "api": "numpy",
                                              "pins": PINNED["pins"]}})
    code, _, err = run_cli("plan", write_matrix(python, with_environments=False))
    assert code == 2 and "pins and packages derive a stack from an image folder" in err


def test_a_derived_environment_is_a_coordinate_of_its_cells(write_matrix):
    from runner.schema import matrix as matrix_mod

    one = matrix_mod.load(write_matrix(stacks_matrix({"numpy-derived": PINNED}),
                                       with_environments=False))
    other = matrix_mod.load(write_matrix(
        stacks_matrix({"numpy-derived": environment("numpy", pins=["numpy==2.3.0"])}),
        with_environments=False, name="other.toml"))
    a, b = ({c.environment: c for c in m.cells} for m in (one, other))
    assert a["numpy"].id == b["numpy"].id        # the shipped one unchanged
    assert a["numpy-derived"].id != b["numpy-derived"].id
    assert "pins" not in a["numpy"].coordinates
    assert a["numpy-derived"].coordinates["pins"] == ["numpy==2.2.6"]


# --- the lock command's pieces (no network) ---------------------------------------------------

def test_a_locks_header_names_the_command_and_its_python():
    head = locking.header("python -m runner lock torch", "requirements.in", True, True)
    command = locking.command_of(head)
    assert command == ("uv pip compile --generate-hashes --python-version 3.11 --python-platform "
                       "x86_64-manylinux_2_28 --index-strategy unsafe-best-match --excludes "
                       "excludes.txt requirements.in -o requirements.lock")
    assert locking.command_of(locking.header("x", "requirements-cuda.in", False, False)) == (
        "uv pip compile --generate-hashes --python-version 3.11 --python-platform "
        "x86_64-manylinux_2_28 requirements-cuda.in -o requirements-cuda.lock")


def test_differences_name_versions_additions_removals_indexes_hashes_and_markers():
    old = "--extra-index-url https://x.org/simple\n\na==1.0 \\\n    --hash=sha256:aa\nb==2.0\n"
    new = "a==1.1 \\\n    --hash=sha256:bb\nc==3.0\n"
    assert locking.differences(old, new) == [
        "a 1.0 → 1.1", "+ c 3.0", "- b 2.0", "indexes ['https://x.org/simple'] → PyPI only"]
    assert locking.differences(new, new.replace("sha256:bb", "sha256:cc")) == [
        "a 1.1: 1 hash(es) not of a file the index serves for it, first sha256:bb (and 1 file(s) "
        "it serves are not pinned)"]                                    # hashes are the lock too
    assert locking.differences(new, new.replace("c==3.0", "c==3.0 ; sys_platform == 'win32'")) \
        == ["c 3.0: pinned as 'c==3.0', resolves to 'c==3.0; sys_platform == \"win32\"'"]


def test_the_resolvers_error_becomes_one_line():
    stderr = ("error: No solution found when resolving dependencies\n  cause: Because there is "
              "no version of numpy==0.0.99 and you require numpy==0.0.99, we can conclude that "
              "your requirements are unsatisfiable.\n")
    assert locking.resolver_reason(stderr, 1) == (
        "No solution found when resolving dependencies: Because there is no version of "
        "numpy==0.0.99 and you require numpy==0.0.99, we can conclude that your requirements "
        "are unsatisfiable.")
    assert locking.resolver_reason("", 2) == "uv exited 2"


@pytest.fixture
def lock_cli(capsys):
    """lock_cli(*args) -> (exit code, stdout, stderr) of `python -m runner lock ARGS`."""

    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(["lock", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_lock_names_only_image_folders(lock_cli):
    code, _, err = lock_cli("nupmy")
    assert code == 2 and err.strip() == ("error: runner lock: images/nupmy is no image folder "
                                         "(did you mean 'numpy'?)")


def test_every_shipped_lock_comes_from_an_in_with_the_same_indexes():
    for target in locking.targets([]):
        assert target.lock.is_file(), f"{target.label}: no lock (python -m runner lock " \
                                      f"{target.name})"
        assert indexes.declared(target.source) == indexes.declared(target.lock), target.label


# --- resolved (PyPI over the network) ---------------------------------------------------------

@pytest.fixture
def own_caches(tmp_path, monkeypatch):
    """Derived locks and environments in this test's own folders: what a failure leaves there
    is seen."""
    cache, envs = tmp_path / "stack-cache", tmp_path / "envs"
    monkeypatch.setattr(stacks, "CACHE_ROOT", cache)
    monkeypatch.setattr(venvs, "ENV_ROOT", envs)
    return cache, envs


BAD = [
    ({"pins": ["numpy==0.0.99"]}, "Because there is no version of numpy==0.0.99"),
    ({"pins": ["numpy==2.4.6"], "packages": ["scipy==1.11.4"]},
     "Because scipy==1.11.4 depends on numpy>=1.21.6,<1.28.0 and you require numpy==2.4.6"),
    ({"packages": ["no-such-distribution-dl-bench-31"]},
     "Because no-such-distribution-dl-bench-31 was not found in the package registry"),
]


@pytest.mark.slow
@pytest.mark.parametrize("derived, reason", BAD, ids=["no-such-pin", "conflict", "no-such-name"])
def test_a_stack_that_cannot_be_resolved_stops_before_anything_is_built(
        derived, reason, pypi, own_caches, write_matrix, run_cli, results_dir):
    # A good derived stack first: it must not be built either.
    text = stacks_matrix({"numpy-good": PINNED, "numpy-bad": environment("numpy", **derived)})
    code, out, err = run_cli(write_matrix(text, with_environments=False))
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert line.startswith("error: ") and "environments.numpy-bad: images/numpy + " in line
    assert "(cpu) cannot be resolved: No solution found when resolving dependencies: " in line
    assert reason in line and "Traceback" not in err
    assert "run folder" not in out and "environment numpy" not in out
    assert not any(results_dir.iterdir())
    cache, envs = own_caches
    assert not envs.exists() or not any(envs.iterdir())
    assert len(list(cache.glob("*/requirements.lock"))) == 1     # numpy-good's, resolved first


@pytest.mark.slow
def test_a_derived_lock_is_made_as_the_shipped_ones_and_cached_by_its_inputs(
        pypi, own_caches, monkeypatch):
    stack = stacks.resolve("numpy", "cpu", ["numpy==2.2.6"], ["six==1.17.0"])
    text = stack.lock.read_text()
    assert text.startswith("# Derived stack images/numpy + numpy==2.2.6 + six==1.17.0 (cpu)")
    assert locking.command_of(text) == locking.command_line("requirements.in", False, False)
    pins = installed.lock_pins(stack.lock)
    shipped = installed.lock_pins(IMAGES_DIR / "numpy" / "requirements.lock")
    assert pins["numpy"] == "2.2.6" and pins["six"] == "1.17.0"
    assert {k: v for k, v in pins.items() if k not in ("numpy", "six")} == \
        {k: v for k, v in shipped.items() if k != "numpy"}      # nothing else moved
    hashed = re.findall(r"^\S+==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}", text, re.M)
    assert len(hashed) == len(pins)
    assert stack.moved() == [f"numpy {shipped['numpy']} → 2.2.6", "+ six 1.17.0"]

    def no_resolver(*args, **kwargs):
        raise AssertionError("resolved again")

    monkeypatch.setattr(stacks, "compile_lock", no_resolver)
    again = stacks.resolve("numpy", "cpu", ["numpy==2.2.6"], ["six==1.17.0"])
    assert again == stack


@pytest.mark.slow
def test_the_plan_shows_a_cuda_torch_stack_resolved_from_pypi(pypi, own_caches, monkeypatch,
                                                               write_matrix, run_cli,
                                                               results_dir):
    # PyPI's torch is the CUDA build: its resolution (no install) works from any machine.
    monkeypatch.setenv("DL_BENCH_FLAVOUR", "cuda")
    monkeypatch.setenv("COLUMNS", "250")
    path = write_matrix(matrix_text(
        None, run_defaults=False, executor="local",
        environments={"torch": environment("torch"),
                      "torch-2-15": environment("torch", pins=["torch==2.15.0"])},
        benchmarks=[{"workload": "matmul", "environments": ["*"]}]), with_environments=False)
    code, out, err = run_cli("plan", path)
    assert code == 0, out + err
    [line] = [ln for ln in out.splitlines() if ln.startswith("derived:")]
    [cached] = own_caches[0].glob("torch-cuda-*/requirements-cuda.lock")
    sha = venvs.sha256_file(cached)
    assert line.startswith(f"derived: images/torch + torch==2.15.0 → lock sha {sha[:12]} "
                           "(torch-2-15, cuda: ")
    shipped = installed.lock_pins(IMAGES_DIR / "torch" / "requirements-cuda.lock")["torch"]
    assert f"torch {shipped} → 2.15.0" in line
    assert installed.lock_pins(cached)["torch"] == "2.15.0"
    assert not any(results_dir.iterdir())


@pytest.mark.slow
def test_lock_makes_a_new_image_folders_locks_and_check_finds_an_edited_in(
        pypi, tmp_path, monkeypatch, lock_cli):
    images = tmp_path / "images"
    (images / "tiny").mkdir(parents=True)
    (images / "tiny" / "requirements.in").write_text("six==1.17.0\n")
    monkeypatch.setattr(locking, "IMAGES_DIR", images)
    code, out, err = lock_cli("tiny")
    assert code == 0 and "images/tiny/requirements.lock: + six 1.17.0" in out, out + err
    lock = (images / "tiny" / "requirements.lock").read_text()
    assert lock.startswith("# Made by `python -m runner lock tiny`; do not edit by hand")
    assert "six==1.17.0 \\\n    --hash=sha256:" in lock
    assert lock_cli("--check")[0] == 0
    (images / "tiny" / "requirements.in").write_text("six==1.17.0\ntomli==2.2.1\n")
    code, out, _ = lock_cli("--check", "tiny")
    assert code == 1 and "differs from what requirements.in resolves to: + tomli 2.2.1" in out
    assert (images / "tiny" / "requirements.lock").read_text() == lock     # --check writes nothing


@pytest.mark.slow
def test_the_shipped_locks_match_their_in(pypi, lock_cli):
    code, out, err = lock_cli("--check", "numpy", "tf-keras")
    assert code == 0, out + err
    assert out.count("✓") == 3 and "matches requirements" in out
