"""issue.md (runner/results/render/issue.py over results/analysis/issue.py): a regression report an
upstream tracker takes as it is, made from a fixture regression — the recorded runs `base` and
`slower` (every sample × 1.2), the treatment given a nightly build of Keras — with the user's
machine planted everywhere a record can hold it (paths, its name, variables), none of which may
reach the issue."""

from __future__ import annotations

import json
import re
import shutil
import socket
from pathlib import Path

import pytest

from runner import cli
from runner.paths import REPO_ROOT
from runner.results.render.issue import scrub
from tests.fixtures import FIXTURE_RUNS

SECRET = "s3cr3t-token-value"
NIGHTLY = {"name": "keras", "build": "keras-nightly", "version": "3.16.0.dev2026102704",
           "origin": "nightly", "date": "2026-10-27"}


def planted(source: Path, target: Path, nightly: bool) -> Path:
    """A copy of a fixture run with this machine's paths, name and variables in its records,
    and (nightly) keras-nightly in place of keras."""
    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["matrix"] = str(target.parent / "private-matrix.toml")
    manifest["environments"]["keras-jax"]["env"] = {"HF_TOKEN": SECRET}
    if nightly:
        manifest["environments"]["keras-jax"]["channel"] = "nightly"
    (target / "manifest.json").write_text(json.dumps(manifest))
    for path in (target / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        meta = record.get("metadata") or {}
        meta.update(env_path=str(target / "venv"), python_executable=f"{Path.home()}/env/bin/python",
                    host_name=socket.gethostname(), inherited_env={"API_TOKEN": SECRET},
                    worker_env={"TOKEN": SECRET}, env_flags={"XLA_FLAGS": SECRET})
        if nightly and record["environment"] == "keras-jax":
            meta.update(stack_builds=[NIGHTLY], keras_version="3.16.0.dev2026102704")
        record["metadata"] = meta
        keras = {"keras-nightly": "3.16.0.dev2026102704"} if nightly else {"keras": "3.15.1"}
        record["distributions"] = {"jax": "0.10.2", **keras}
        record["log"] = str(target / "logs" / "x.log")
        path.write_text(json.dumps(record))
    return target


@pytest.fixture(scope="module")
def issue(tmp_path_factory):
    home = tmp_path_factory.mktemp("users-private-folder")
    base = planted(FIXTURE_RUNS / "base", home / "base", nightly=False)
    slower = planted(FIXTURE_RUNS / "slower", home / "slower", nightly=True)
    code = cli.main(["report", str(slower), "--issue", "--control-run", str(base),
                     "--control", "keras-jax", "--treatment", "keras-jax"])
    assert code == 0
    return (slower / "issue.md").read_text(), home


def test_the_title_names_the_build_the_row_and_the_ratio_with_its_interval(issue):
    text, _ = issue
    title = text.splitlines()[0]
    found = re.fullmatch(r"# keras-nightly 3\.16\.0\.dev2026102704 \(2026-10-27\): (cnn \(fit\)) on "
                         r"keras-jax 1\.(\d\d)× slower \(([\d.]+)–([\d.]+)\)", title)
    assert found, title
    assert 1.15 <= float(f"1.{found.group(2)}") <= 1.25
    assert float(found.group(3)) < 1.2 < float(found.group(4))


def test_it_has_what_a_tracker_asks(issue):
    text, _ = issue
    for section in ("## Builds", "## What moved between the stacks", "## Measurements",
                    "## Machine", "## Where the time moved (profiles)", "## Reproduce"):
        assert section in text
    assert "| Build | keras 3.15.1 | keras-nightly 3.16.0.dev2026102704 (2026-10-27) |" in text
    assert "run fixture/base | 2026-11-22, run fixture/slower |" in text
    assert "- + keras-nightly 3.16.0.dev2026102704" in text and "- - keras 3.15.1" in text
    rows = [line for line in text.splitlines() if line.startswith("| cnn") and "slower" in line]
    assert rows and "× (" in rows[0] and "%" in rows[0]               # interval, detectable
    assert "NVIDIA A100-SXM4-80GB ×" in text and "driver 550.54.15, CUDA 12.4" in text
    assert "CPU AMD EPYC 7V13 (24 logical)" in text
    assert "| not recorded |" in text                # the fixture records hold no answer
    assert 'date = "2026-10-27"' in text               # the channel pinned to the day it measured
    assert "python -m runner ab matrix.toml" in text and "python -m runner reproduce RUN_DIR" in text
    assert "`keras-jax` sets `HF_TOKEN`" in text           # a matrix's variable: its name only


def test_nothing_of_the_machine_reaches_it(issue):
    text, home = issue
    for private in (str(home), str(Path.home()), str(REPO_ROOT), SECRET, "private-matrix",
                    socket.gethostname(), "env_path", "/tmp/", "API_TOKEN"):
        assert private not in text, private
    assert not re.search(r"(?<![\w:/.<~-])/(?:home|tmp|root|work|usr|opt|var)\b", text)


def test_scrub_takes_paths_and_names_but_leaves_urls_and_words():
    text = ("see /home/ada/keras and ~/wheels/x.whl on ada-laptop, https://pypi.org/simple/x, "
            "ms/step, images/jax, 1.2×, </sub>")
    assert scrub(text, ["ada-laptop"]) == ("see <path> and <path> on <private>, "
                                            "https://pypi.org/simple/x, ms/step, images/jax, "
                                            "1.2×, </sub>")


def test_a_path_that_comes_in_with_a_note_is_taken_out(issue, tmp_path):
    from runner.results.render.issue import issue_from_runs

    _, home = issue
    path = issue_from_runs((home / "base", "keras-jax"), (home / "slower", "keras-jax"),
                           [f"bisect worked in {home}/bisect and {Path.home()}/.cache"])
    text = path.read_text()
    assert "- bisect worked in <path> and <private>/.cache" in text
    assert str(home) not in text


def test_which_two_sides_it_cannot_tell_is_one_line(run_cli):
    code, _, err = run_cli("report", FIXTURE_RUNS / "base", "--issue")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "report --issue needs --control ENV --treatment ENV (its environments: " \
           "keras-tensorflow, keras-jax, keras2, jax)" in err
    code, _, err = run_cli("report", FIXTURE_RUNS / "base", "--issue", "--control", "keras-jax",
                           "--treatment", "torch")
    assert code == 2 and "no record of environment 'torch'" in err
    assert not (FIXTURE_RUNS / "base" / "issue.md").exists()


def test_variables_that_differ_between_the_sides_are_named_beside_the_stacks(issue, tmp_path):
    """A variable set on one side only (a planted JAX_DISABLE_JIT=1 made the CNN 1.72× slower
    on this CPU, 2026-11-28) moves a time as a new build does: the issue names it, and its
    value stays out."""
    _, home = issue
    treatment = tmp_path / "slower-env"
    shutil.copytree(home / "slower", treatment)
    manifest = json.loads((treatment / "manifest.json").read_text())
    manifest["environments"]["keras-jax"]["env"] = {"HF_TOKEN": "an0ther-" + SECRET,
                                                    "JAX_DISABLE_JIT": "1"}
    (treatment / "manifest.json").write_text(json.dumps(manifest))
    assert cli.main(["report", str(treatment), "--issue", "--control-run", str(home / "base"),
                     "--control", "keras-jax", "--treatment", "keras-jax"]) == 0
    text = (treatment / "issue.md").read_text()
    moved = text.split("## What moved between the stacks")[1].split("## Measurements")[0]
    assert ("- the workers' variables (values left out): JAX_DISABLE_JIT set on B only; "
            "HF_TOKEN set to another value on B") in moved
    assert SECRET not in text
    same = (home / "slower" / "issue.md").read_text()                 # same value both sides
    assert "the workers' variables" not in same
