"""The one registry of the runner's environment variables (runner/settings.py): every name the
code uses is declared there, host modules read them only through it, a bad value is one line and
exit 2 before anything is made, doctor shows what is set, and the docs' table is made from it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner import cli, manual, settings
from runner.errors import UsageError
from runner.paths import REPO_ROOT as ROOT

RUNNER = ROOT / "runner"
OURS = re.compile(r"^(DL_BENCH_[A-Z0-9_]+|RUNNER_ENV_DIR)$")
BAD = {settings.FLAVOUR: "gpu", settings.GPU: "0, 1 2", settings.MIN_FREE_MB: "abc",
       settings.INHERIT_ENV: "A B", settings.LOG_HEAD_MB: "0", settings.LOG_TAIL_MB: "inf",
       settings.ENGINE_TIMEOUT: "-1", settings.ENGINE_RECONNECT: "nan",
       settings.DOCKER_MEMORY: "lots", settings.RAY_RETRIES: "101",
       settings.NODE_EXECUTOR: "k8s", settings.HISTORY_URL: "mysql://u@h/db",
       settings.LOCAL_MEMORY: "lots"}


def modules() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text())) for p in RUNNER.rglob("*.py")]


def literals(tree: ast.Module) -> set[str]:
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and OURS.match(n.value)}


def test_every_variable_the_code_names_is_declared_once():
    for path, tree in modules():
        for name in literals(tree):
            assert name in settings.SETTINGS, f"{path}: {name} is not in runner/settings.py"
            if path != "runner/settings.py" and not path.startswith("runner/worker/"):
                pytest.fail(f"{path}: names {name} itself; import its name from settings")
    # The worker cannot import the host: its own constants are the runner's and the matrices'.
    worker = set().union(*(literals(t) for p, t in modules() if p.startswith("runner/worker/")))
    assert worker and all(settings.SETTINGS[n].set_by != settings.USER for n in worker)


def environ_reads(tree: ast.Module) -> list[ast.AST]:
    """What a module reads from os.environ: get/getenv arguments and subscripts."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in (
                "os.environ.get", "os.getenv", "os.environ.setdefault"):
            found.append(node.args[0])
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            found.append(node.slice)
    return found


def test_host_modules_read_the_registrys_variables_only_through_it():
    for path, tree in modules():
        if path.startswith("runner/worker/") or path == "runner/settings.py":
            continue
        # A registered name is read as settings.NAME, never through a module's own alias of it
        # (FLAVOUR_ENV = settings.FLAVOUR): one place names each variable.
        assert not aliases(tree), f"{path}: {aliases(tree)} alias the settings registry"
        for read in environ_reads(tree):
            shown = ast.unparse(read)
            assert not shown.startswith("settings."), \
                f"{path}: os.environ read of {shown}: use settings.get"


def aliases(tree: ast.AST) -> list[str]:
    """Module-level names bound to a registered variable's name (X_ENV = settings.FLAVOUR)."""
    return [t.id for n in getattr(tree, "body", []) if isinstance(n, ast.Assign)
            and ast.unparse(n.value).startswith("settings.") and ast.unparse(n.value)[9:].isupper()
            for t in n.targets if isinstance(t, ast.Name)]


def test_the_checker_catches_a_planted_read_and_alias():
    planted = ast.parse("import os\nX_ENV = settings.FLAVOUR\nos.environ.get(X_ENV)\n")
    assert [ast.unparse(a) for a in environ_reads(planted)] == ["X_ENV"]
    assert aliases(planted) == ["X_ENV"]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_line_naming_the_variable(name):
    with pytest.raises(UsageError) as caught:
        settings.validate({name: BAD[name]})
    assert str(caught.value).startswith(f"{name}={BAD[name]!r}: expected ")
    assert "\n" not in str(caught.value)


def test_every_user_setting_with_a_check_has_a_bad_example():
    checked = {s.name for s in settings.SETTINGS.values()
               if s.set_by == settings.USER and s.parse not in (str, settings.folder)}
    assert checked == set(BAD)


def test_values_and_defaults():
    env = {settings.MIN_FREE_MB: "0", settings.LOG_HEAD_MB: "0.5", settings.GPU: "1, GPU-ab",
           settings.INHERIT_ENV: "XLA_FLAGS, OMP_*", settings.FLAVOUR: " "}
    assert settings.get(settings.MIN_FREE_MB, env) == 0
    assert settings.get(settings.LOG_HEAD_MB, env) == 0.5
    assert settings.get(settings.GPU, env) == ("1", "GPU-ab")
    assert settings.get(settings.GPU, {settings.GPU: ""}) == ()       # set, empty: no GPU
    assert settings.get(settings.INHERIT_ENV, env) == ("XLA_FLAGS", "OMP_*")
    assert settings.get(settings.FLAVOUR, env) is None                # blank: unset
    assert settings.get(settings.MIN_FREE_MB, {}) == 200
    assert settings.get(settings.RAY_RETRIES, {}) == 2
    assert settings.get(settings.ENV_DIR, {settings.ENV_DIR: "~/envs"}) == Path.home() / "envs"


def test_a_bad_value_stops_a_run_before_its_folder_exists(tmp_path):
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "runner", str(ROOT / "matrix.toml"),
                           "--results-dir", str(results)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               settings.MIN_FREE_MB: "abc"})
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: DL_BENCH_MIN_FREE_MB='abc': expected a whole number of MB\n"
    assert done.stdout == "" and not results.exists()


def test_doctor_shows_the_settings_that_are_set(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    for name in settings.SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["doctor", "--executor", "local"]) in (0, 1)
    assert "none of the runner's variables is set" in capsys.readouterr().out
    monkeypatch.setenv(settings.MIN_FREE_MB, "500")
    monkeypatch.setenv(settings.FLAVOUR, "cpu")
    assert cli.main(["doctor", "--executor", "local"]) in (0, 1)
    out = capsys.readouterr().out
    assert "setting: DL_BENCH_MIN_FREE_MB=500 (the run stops" in out
    assert "setting: DL_BENCH_FLAVOUR=cpu (which lock" in out


def test_the_docs_table_is_the_registry():
    table = manual.settings_table()
    for setting in settings.SETTINGS.values():
        assert f"| `{setting.name}` |" in table
    assert "| `DL_BENCH_MIN_FREE_MB` | whole number (MB) | 200 |" in table
    assert "<!-- generated: settings -->" in (ROOT / "docs" / "settings.md").read_text()
