"""User workloads ([workloads.<name>], the user's own file): validated from the file's text
without importing it, planned per API and task, their code staged read-only and hashed into the
cell ids, run by the real worker in the real environments (local, Docker; Ray in test_ray.py),
and every failure inside the user's code a failed record with its traceback in the log."""

from __future__ import annotations

import csv
import io
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from runner.schema import matrix as matrix_mod
from runner.schema.user_workloads import RESERVED_MODULES

from tests.hostile.test_hostile_input import assert_one_line_exit_2, run_main
from runner.paths import REPO_ROOT as ROOT

EXAMPLE = ROOT / "examples" / "user-workloads"

NUMPY_ENV = """
[environments.numpy]
image = "numpy"
api = "numpy"
"""

STEP = '''
import numpy as np

def numpy_run(spec):
    a = np.full((spec.options["n"], spec.options["n"]), 0.5, np.float32)
    return lambda: a @ a
'''


def workload_file(folder: Path, source: str, name: str = "bench.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def user_matrix(tmp_path: Path, table: str, benchmarks: str = "", run: str = "") -> Path:
    """A matrix beside bench/ with one [workloads.w] table (its text given) and NumPy."""
    bench = benchmarks or """
        [[benchmarks]]
        workload = "w"
        environments = ["numpy"]
    """
    path = tmp_path / "matrix.toml"
    path.write_text(textwrap.dedent(run or "[run]\nrepeats = 1\nsteps = 3\nprofile = 'full'\n")
                    + textwrap.dedent(NUMPY_ENV) + "[workloads.w]\n" + textwrap.dedent(table)
                    + textwrap.dedent(bench), encoding="utf-8")
    return path


# --- validation: the file read, never imported ------------------------------------------------

BAD = [
    # (the file's source, the [workloads.w] table, the benchmarks, a fragment of the error)
    (STEP, 'file = "bench/missing.py"\ntasks = ["run"]\n', "",
     "workloads.w.file: 'bench/missing.py': no such file"),
    ("def numpy_run(spec):\n    return lambda: (\n", 'file = "bench/bench.py"\ntasks = ["run"]\n',
     "", "workloads.w.file: bench.py line 2: not Python"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run", "fit"]\n', "",
     "workloads.w.tasks: bench/bench.py defines no function for 'fit' (keras_model and "
     "keras_data, or keras_fit, tf_keras_fit, torch_fit"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8, unused = 3 }\n', "",
     "workloads.w.options.unused: bench/bench.py never reads it"),
    ("def keras_model(spec):\n    pass\n", 'file = "bench/bench.py"\ntasks = ["fit"]\n', "",
     "workloads.w.file: bench/bench.py defines keras_model but no keras_data"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
     '[[benchmarks]]\nworkload = "w"\noptions = { m = 3 }\n',
     "benchmarks[0]: options.m: unknown option for w"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
     '[[benchmarks]]\nworkload = "w"\ntask = "fit"\n',
     "benchmarks[0]: task: w has no task 'fit' (it has run)"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
     '[[benchmarks]]\nworkload = "v"\n', "'v' is not a built-in workload"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\nsha256 = "' + "0" * 64
     + '"\n', "", "workloads.w.sha256: bench/bench.py and the modules it imports hash to"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = [8, 16] }\n', "",
     "a default is one number, string or boolean"),
    (STEP, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\nfiles = 1\n', "",
     "workloads.w.files: unknown key (did you mean 'file'?)"),
    # a contract function that cannot take what the worker passes: caught before the run
    ("def numpy_run(spec, data):\n    return data\n", 'file = "bench/bench.py"\ntasks = ["run"]\n',
     "", "workloads.w.file: bench/bench.py line 1: numpy_run is called as numpy_run(spec), but "
     "it is def numpy_run(spec, data)"),
    (STEP + "def answer(output):\n    return {}\n",
     'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n', "",
     "answer is called as answer(spec, output), but it is def answer(output)"),
    ("def keras_model():\n    pass\ndef keras_data(spec):\n    pass\n",
     'file = "bench/bench.py"\ntasks = ["fit"]\n', "",
     "bench/bench.py line 1: keras_model is called as keras_model(spec), but it is def "
     "keras_model()"),
    (STEP + "def flops_per_step(spec, *, scale):\n    return 1\n",
     'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n', "",
     "flops_per_step is called as flops_per_step(spec), but it is def flops_per_step(spec, *, "
     "scale)"),
]


@pytest.mark.parametrize("source, table, benchmarks, fragment", BAD)
def test_bad_user_workloads_are_one_line_exit_2_and_nothing_written(
        source, table, benchmarks, fragment, tmp_path, run_cli, results_dir):
    workload_file(tmp_path / "bench", source)
    code, _, err = run_cli(user_matrix(tmp_path, table, benchmarks))
    line = assert_one_line_exit_2(code, err)
    assert fragment in line
    assert list(results_dir.iterdir()) == []


def test_signatures_that_take_what_the_worker_passes_are_accepted(tmp_path):
    workload_file(tmp_path / "bench", STEP.replace("numpy_run(spec)", "numpy_run(spec, *more)")
                  + "def answer(spec, output, scale=1):\n    return {}\n"
                  + "def numpy_helper_run(a, b):\n    pass\n"      # outside the contract
                  + "def items_per_step(*args):\n    return 1\n"
                  # a decorator may supply arguments: not judged
                  + "import functools\n@functools.partial(functools.partial, 2)\n"
                    "def flops_per_step(n, spec):\n    return n\n")
    matrix = matrix_mod.load(user_matrix(
        tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n'))
    (workload,) = matrix.user_workloads
    assert {"numpy_run", "answer", "items_per_step", "flops_per_step"} <= set(workload.functions)


def test_a_workload_may_not_take_a_built_in_name_or_shadow_a_framework(tmp_path, run_cli,
                                                                       results_dir):
    workload_file(tmp_path / "bench", STEP)
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n')
    path.write_text(path.read_text().replace("[workloads.w]", "[workloads.matmul]")
                    .replace('workload = "w"', 'workload = "matmul"'))
    line = assert_one_line_exit_2(*run_cli(path)[::2])
    assert "workloads: matmul: a built-in workload has this name" in line
    assert "torch" in RESERVED_MODULES
    matrix = 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n'
    # A module of the folder that shadows what the worker imports counts once the file imports
    # it: its name is refused.
    workload_file(tmp_path / "bench", "x = 1\n", name="torch.py")
    assert run_cli(user_matrix(tmp_path, matrix), "--dry-run")[0] == 0   # not imported: no code
    workload_file(tmp_path / "bench", "import torch\n" + STEP)
    line = assert_one_line_exit_2(*run_cli(user_matrix(tmp_path, matrix))[::2])
    assert "torch.py, a module beside it, shares its name with a package the worker " \
        "imports (torch)" in line
    (tmp_path / "bench" / "torch.py").unlink()
    workload_file(tmp_path / "bench", "x = 1\n", name="json.py")
    workload_file(tmp_path / "bench", "import json\n" + STEP)
    line = assert_one_line_exit_2(*run_cli(user_matrix(tmp_path, matrix))[::2])
    assert "json.py, a module beside it, shares its name with a standard-library " \
        "module (json)" in line
    (tmp_path / "bench" / "json.py").unlink()
    # A broken script beside the workload that it does not import is no part of it; a module
    # it imports (in a function too, and what that one imports) is, and says so.
    workload_file(tmp_path / "bench", "def helper(:\n", name="scratch.py")
    workload_file(tmp_path / "bench", STEP)
    assert run_cli(user_matrix(tmp_path, matrix), "--dry-run")[0] == 0
    workload_file(tmp_path / "bench", "def lazy():\n    import helpers\n" + STEP)
    workload_file(tmp_path / "bench", "from scratch import helper\n", name="helpers.py")
    line = assert_one_line_exit_2(*run_cli(user_matrix(tmp_path, matrix))[::2])
    assert "workloads.w.file: scratch.py (imported by helpers.py) line 1: not Python" in line
    assert list(results_dir.iterdir()) == []


def test_the_host_never_imports_the_file_and_plans_each_api_and_task(tmp_path, run_cli):
    workload_file(tmp_path / "bench", '''
        raise SystemExit("the host imported me")

        def keras_model(spec): ...
        def keras_data(spec): ...
        def torch_predict(spec): ...
        from helpers import jax_fit
    ''')
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["fit", "predict"]\n', """
        [environments.torch]
        image = "torch"
        api = "torch"
        [environments.jax]
        image = "jax"
        api = "jax"
        [environments.keras-jax]
        image = "jax"
        api = "keras"
        backend = "jax"
        [[benchmarks]]
        workload = "w"
        task = ["fit", "predict"]
        batch_size = 8
    """)
    code, out, err = run_cli(path, "--dry-run")
    assert code == 0, out + err
    assert "4 runs to do, 0 done, 4 not applicable" in " ".join(out.split())
    loaded = matrix_mod.load(path)
    runs = {c.name: (c.not_applicable, c.user_workload) for c in loaded.cells}
    assert {name: reason for name, (reason, _) in runs.items() if reason} == {
        "w-fit-numpy-b8": "bench/bench.py defines no numpy_fit",
        "w-predict-numpy-b8": "bench/bench.py defines no numpy_predict",
        "w-fit-torch-b8": "bench/bench.py defines no torch_fit",
        "w-predict-jax-b8": "bench/bench.py defines no jax_predict"}
    assert runs["w-fit-keras-jax-b8"][0] is None
    assert runs["w-fit-keras-jax-b8"][1].workload.runs_as("keras", "fit") == "model"
    assert runs["w-fit-jax-b8"][1].workload.runs_as("jax", "fit") == "step"


def test_the_code_digest_is_in_the_cell_id_and_the_run_folder_matrix(tmp_path):
    source = workload_file(tmp_path / "bench", STEP)
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n')
    first = matrix_mod.load(path)
    (tmp_path / "notes.txt").write_text("not code")            # beside the matrix: no code
    assert [c.id for c in matrix_mod.load(path).cells] == [c.id for c in first.cells]
    helpers = workload_file(tmp_path / "bench", "def helper():\n    return 1\n", name="helpers.py")
    beside = matrix_mod.load(path)                  # beside it, not imported: no part of its code
    assert [c.id for c in beside.cells] == [c.id for c in first.cells]
    source.write_text("from helpers import helper\n" + source.read_text())
    with_helper = matrix_mod.load(path)             # imported: its code
    assert with_helper.cells[0].user_workload.modules == ("bench.py", "helpers.py")
    helpers.write_text(helpers.read_text() + "\n# an edit of the imported module\n")
    edited = matrix_mod.load(path)
    assert len({c.id for c in (*first.cells, *with_helper.cells, *edited.cells)}) == 3
    assert [c.name for c in edited.cells] == [c.name for c in first.cells] == ["w-run-numpy-b1"]
    sha = edited.cells[0].user_workload.sha256
    assert edited.resolved["workloads"]["w"]["sha256"] == sha
    assert edited.cells[0].coordinates["workload_sha256"] == sha


# --- runs: the real worker, the real environments ----------------------------------------------

FAILING = {
    "ok": STEP,
    "raises": "def numpy_run(spec):\n    raise ValueError('boom in the factory')\n",
    "not_callable": "def numpy_run(spec):\n    return 42\n",
    "returns_none": "def numpy_run(spec):\n    return lambda: None\n",
    "import_error": "import definitely_not_installed_here\n\ndef numpy_run(spec):\n    pass\n",
    "bad_hook": STEP + "\ndef flops_per_step(spec):\n    return 'many'\n",
}


def failing_matrix(tmp_path: Path) -> Path:
    tables, benches = [], []
    for name, source in FAILING.items():
        workload_file(tmp_path / name, source)
        options = "options = { n = 8 }\n" if '"n"' in source else ""
        tables.append(f'[workloads.{name}]\nfile = "{name}/bench.py"\ntasks = ["run"]\n{options}')
        benches.append(f'[[benchmarks]]\nworkload = "{name}"\n')
    path = tmp_path / "matrix.toml"
    path.write_text("[run]\nname = 'user'\nrepeats = 1\nsteps = 3\nprofile = 'full'\n"
                    + NUMPY_ENV + "\n".join(tables) + "\n".join(benches), encoding="utf-8")
    return path


def records(run_dir: Path) -> dict[str, dict]:
    return {r["workload"]: r for r in (json.loads(p.read_text())
                                       for p in (run_dir / "cells").glob("*.json"))}


def only_run(results_dir: Path, name: str) -> Path:
    (run_dir,) = [p for p in (results_dir / name).iterdir() if (p / "manifest.json").exists()]
    return run_dir


@pytest.mark.slow
def test_failures_in_the_users_code_are_failed_records_and_the_run_goes_on(
        tmp_path, run_cli, results_dir):
    code, out, err = run_cli(failing_matrix(tmp_path))
    assert code == 1, out + err
    run_dir = only_run(results_dir, "user")
    got = records(run_dir)
    assert {name: r["status"] for name, r in got.items()} == {
        "ok": "ok", "raises": "failed", "not_callable": "failed", "returns_none": "failed",
        "import_error": "failed", "bad_hook": "failed"}
    errors = {name: r["error"] for name, r in got.items()}
    assert "ValueError: boom in the factory" in errors["raises"]
    assert "numpy_run(spec) returned int: it returns a callable" in errors["not_callable"]
    assert "returned NoneType: return what it computed (a NumPy array)" in errors["returns_none"]
    assert "No module named 'definitely_not_installed_here'" in errors["import_error"]
    assert "flops_per_step(spec) returned 'many'" in errors["bad_hook"]
    log = (run_dir / got["raises"]["log"]).read_text()
    assert 'raises/bench.py", line 2, in numpy_run' not in log     # the staged copy's path
    assert "bench.py\", line 2, in numpy_run" in log and "Traceback" in log
    report = (run_dir / "report.md").read_text()
    assert "ValueError: boom in the factory" in report
    ok = got["ok"]
    assert ok["user_workload"]["name"] == "ok" and ok["user_workload"]["runs_as"] == "step"
    assert ok["metadata"]["workload_sha256"] == ok["user_workload"]["sha256"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    staged = run_dir / manifest["workloads"]["ok"]["staged"] / "bench.py"
    assert staged.read_text() == FAILING["ok"] and not staged.stat().st_mode & 0o222


@pytest.mark.slow
def test_resume_refuses_edited_code_and_reproduce_runs_the_staged_copy(
        tmp_path, run_cli, results_dir):
    source = workload_file(tmp_path / "bench", STEP)
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
                       run="[run]\nname = 'u'\nrepeats = 2\nsteps = 3\nprofile = 'full'\n")
    assert run_cli(path)[0] == 0
    run_dir = only_run(results_dir, "u")
    source.write_text(STEP.replace("0.5", "0.25"))
    code, _, err = run_cli(path, "--resume", run_dir)
    line = assert_one_line_exit_2(code, err)
    assert "workloads.w.sha256" in line and "not the matrix this run was started with" in line
    shutil.rmtree(tmp_path / "bench")                   # the original is gone: the copy runs
    code, out, err = run_cli("reproduce", run_dir)
    assert code == 0, out + err
    again = [p for p in (results_dir / "u").iterdir() if p != run_dir and p.is_dir()]
    (new_run,) = again
    old, new = records(run_dir)["w"], records(new_run)["w"]
    assert new["cell_name"] == old["cell_name"] and new["status"] == "ok"
    assert new["user_workload"]["sha256"] == old["user_workload"]["sha256"]


@pytest.mark.slow
def test_compare_says_when_the_users_code_changed(tmp_path, run_cli, results_dir, monkeypatch):
    source = workload_file(tmp_path / "bench", STEP)
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
                       run="[run]\nname = 'c'\nrepeats = 2\nsteps = 4\nprofile = 'full'\n")
    assert run_cli(path)[0] == 0
    source.write_text(STEP + "\n# edited\n")
    assert run_cli(path)[0] == 0
    first, second = sorted(p for p in (results_dir / "c").iterdir() if p.is_dir())
    code, out, err = run_main("compare", first, second)
    assert code == 0, out + err
    (written,) = second.glob("compare-*.md")
    assert "| w (run) | 1 | numpy | same |" in written.read_text()
    assert "not comparable | metadata or settings differ: workload_sha256" in written.read_text()
    monkeypatch.setenv("COLUMNS", "250")
    code, out, err = run_main("history", "show", "w-run-numpy-b1",
                              "--db", f"sqlite:///{results_dir / 'history.sqlite'}")
    assert code == 0, out + err
    assert "workload_sha256" in " ".join(out.split())      # the series says the code changed


EXAMPLE_SELECTION = ("--profile", "smoke", "--only", "keras-", "--only", "torch", "--only", "numpy")
EXAMPLE_CELLS = {(e, t) for e in ("keras-tensorflow", "keras-jax", "keras-torch", "torch",
                                  "hf-torch")
                 for t in ("fit", "predict")} | {("numpy", "predict")}


def test_the_examples_plan_as_it_stands(run_cli):
    """The README's example, copied as it stands, plans every API's fit and predict with the
    profile's 3 repeats (the slow test below runs each cell once)."""
    code, out, err = run_cli(EXAMPLE / "mlp.toml", *EXAMPLE_SELECTION, "--dry-run")
    assert code == 0, out + err
    planned = {(line.split()[0], int(line.split()[2])) for line in out.splitlines()
               if line.startswith("mlp-") and line.rstrip().endswith("to run")}
    assert planned == {(f"mlp-{task}-{env}-b256", 3) for env, task in EXAMPLE_CELLS}
    assert "mlp-fit-numpy-b256   mlp/mlp.py defines no numpy_fit" in out


@pytest.mark.slow
def test_the_example_runs_one_keras_model_on_three_backends_beside_native_steps(
        run_cli, results_dir, tmp_path):
    """The README's example: examples/user-workloads/mlp.toml, smoke profile (no GPU here),
    Keras 3 on TensorFlow, JAX and PyTorch beside native PyTorch and NumPy; a copy whose smoke
    profile takes one repeat of each cell instead of 3 (what is checked here needs one)."""
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example)
    matrix = example / "mlp.toml"
    text = matrix.read_text(encoding="utf-8")
    assert "[profiles.smoke]\nrepeats = 3\n" in text
    matrix.write_text(text.replace("[profiles.smoke]\nrepeats = 3\n",
                                   "[profiles.smoke]\nrepeats = 1\n"), encoding="utf-8")
    code, out, err = run_cli(matrix, *EXAMPLE_SELECTION)
    assert code == 0, out + err
    run_dir = only_run(results_dir, "user-mlp")
    got = [json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")]
    ran = {(r["environment"], r["task"]) for r in got if r["status"] == "ok"}
    assert ran == EXAMPLE_CELLS and len(got) == len(EXAMPLE_CELLS) + 1     # + numpy fit, NA
    assert {r["status"] for r in got} == {"ok", "not_applicable"}
    keras = [r for r in got if r["api"] == "keras" and r["status"] == "ok"]
    assert {r["effective"]["user_workload"].split(", ")[-1] for r in keras} == {"model"}
    assert all(r["flops_per_step"] > 0 and r["loss_first"] is not None for r in keras
               if r["task"] == "fit")
    assert {r["extra"]["weights"] for r in keras} == {"the file's own (KEEP_WEIGHTS = True)"}
    report = (run_dir / "report.md").read_text()
    assert "| mlp (fit) | 256 |" in report and "| mlp (predict) | 256 |" in report
    assert "### Environments against keras-tensorflow" in report
    assert "No cell computed a different answer." in report
    # Keras and native compute the same logits from the same weights: the predict row's answers
    # agree across every API; Keras fit's (its prediction before training) across backends.
    checks = {(row["environment"], row["task"]): row["answer_check"] for row in
              csv.DictReader(io.StringIO((run_dir / "summary.csv").read_text()))}
    assert {env for (env, task), check in checks.items() if task == "predict" and
            check == "same"} == {"keras-tensorflow", "keras-jax", "keras-torch", "torch", "hf-torch",
                                 "numpy"}
    assert {env for (env, task), check in checks.items() if task == "fit" and
            check == "same"} == {"keras-tensorflow", "keras-jax", "keras-torch"}
    assert "history: added user-mlp/" in out


def test_a_benchmark_naming_no_task_runs_every_task_of_the_workload(tmp_path):
    """The README's example as it stands: `tasks = ["fit", "predict"]` and a benchmark with
    no `task` (before: "task: my-mlp needs one of fit, predict")."""
    workload_file(tmp_path / "bench", """
        def keras_model(spec):
            return spec.options["units"]

        def keras_data(spec):
            return None
    """, name="my_mlp.py")
    (tmp_path / "matrix.toml").write_text(textwrap.dedent("""
        [environments.keras-jax]
        image = "jax"
        api = "keras"
        backend = "jax"

        [workloads.my-mlp]
        file = "bench/my_mlp.py"
        tasks = ["fit", "predict"]
        options = { units = 64 }

        [[benchmarks]]
        workload = "my-mlp"
        environments = ["*"]
        batch_size = [32, 256]
    """))
    cells = matrix_mod.load(tmp_path / "matrix.toml").cells
    assert sorted((c.task, c.batch_size) for c in cells) == [
        ("fit", 32), ("fit", 256), ("predict", 32), ("predict", 256)]
