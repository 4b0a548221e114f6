"""Every invalid input: exit code 2, one clear line on stderr, no traceback, nothing written."""

from __future__ import annotations

import pytest

from tests.matrices import matrix_text

VALID_BENCH = """
[[benchmarks]]
workload = "matmul"
environments = ["*"]
"""

REJECTIONS = [
    # (matrix text added to the environments, expected fragment of the error line)
    ("[run]\nrepeat = 3\n" + VALID_BENCH, "run.repeat: unknown key (did you mean 'repeats'?)"),
    ("[run]\nrepeats = 0\n" + VALID_BENCH, "run.repeats: must be > 0, got 0"),
    ("[run]\nsteps = -5\n" + VALID_BENCH, 'run.steps: expected a positive whole number or "auto", got -5'),
    ("[run]\nsteps = \"10\"\n" + VALID_BENCH, 'run.steps: expected a positive whole number or "auto", got \'10\''),
    ("[run]\nsteps = \"aut\"\n" + VALID_BENCH, "did you mean 'auto'?"),
    ("[run]\nmin_time = 5.0\nmax_time = 2.0\n" + VALID_BENCH, "run.min_time (5 s) is above run.max_time (2 s)"),
    ("[run]\ntimeout = 0\n" + VALID_BENCH, "run.timeout: must be > 0"),
    ("[run]\nexecutor = \"dockr\"\n" + VALID_BENCH, "did you mean 'docker'?"),
    ("[run]\nprofile = \"smok\"\n" + VALID_BENCH, "did you mean 'smoke'?"),
    ("[run]\nname = \"../escape\"\n" + VALID_BENCH, "run.name: '../escape' must be letters"),
    ("[run]\nname = \"a/b\"\n" + VALID_BENCH, "run.name: 'a/b' must be letters"),
    ("[[benchmarks]]\nworkload = \"matmull\"\n", "did you mean 'matmul'?"),
    ("[[benchmarks]]\nworkload = \"matmul\"\ntask = \"fit\"\n", "matmul has no task 'fit'"),
    ("[[benchmarks]]\nworkload = \"matmul\"\ntask = \"runn\"\n", "did you mean 'run'?"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nprecision = \"float23\"\n",
     "benchmarks[0].precision: 'float23' is not one of"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nprecision = []\n", "benchmarks[0].precision: empty list"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nprecision = [\"float32\", \"float32\"]\n", "repeated value"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nbatch_size = 0\n", "must be a positive whole number"),
    ("[[benchmarks]]\nworkload = \"matmul\"\njit = \"fast\"\n", "benchmarks[0].jit: 'fast' is not one of"),
    ("[[benchmarks]]\nworkload = \"matmul\"\ntf32 = 1\n", "benchmarks[0].tf32: expected true or false"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nsteps_per_execution = 1.5\n", "expected a whole number"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nenvironments = [\"nmupy\"]\n",
     "unknown environment 'nmupy' (did you mean 'numpy'?)"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nenvironments = []\n", "benchmarks[0].environments: must not be empty"),
    ("[[benchmarks]]\nworkload = \"matmul\"\noptions = { m = 5 }\n", "options.m: unknown option"),
    ("[[benchmarks]]\nworkload = \"matmul\"\noptions = { n = 0 }\n", "options.n: must be positive"),
    ("[[benchmarks]]\nworkload = \"matmul\"\noptions = { n = \"big\" }\n", "options.n: expected int"),
    ("[[benchmarks]]\nworkload = \"cnn\"\n", "batch_size: required for cnn"),
    ("[[benchmarks]]\nworkload = \"matmul\"\nworkloads = 1\n", "unknown key (did you mean 'workload'?)"),
    ("[[benchmarks]]\ntask = \"run\"\n", "benchmarks[0].workload: missing required key"),
    ("[profiles.smoke]\nstep = 5\n" + VALID_BENCH, "profiles.smoke.step: not a [run] key or benchmark axis (did you mean 'steps'?)"),
    ("[profiles.smoke]\nsize = \"teeny\"\n" + VALID_BENCH, "profiles.smoke.size: 'teeny' is not one of"),
    ("[profiles.quick]\nsteps = 5\n" + VALID_BENCH, "profiles.quick: unknown profile"),
    ("[environments.bad]\nimage = \"numpy\"\napi = \"pytorch\"\n" + VALID_BENCH,
     "environments.bad.api: 'pytorch' is not one of"),
    ("[environments.bad]\nimage = \"jax\"\napi = \"keras\"\n" + VALID_BENCH, "needs backend"),
    ("[environments.bad]\nimage = \"jax\"\napi = \"keras\"\nbackend = \"jaxx\"\n" + VALID_BENCH,
     "did you mean 'jax'?"),
    ("[environments.bad]\nimage = \"jax\"\napi = \"jax\"\nbackend = \"jax\"\n" + VALID_BENCH,
     "backend applies to api = 'keras' only"),
    ("[environments.bad]\nimage = \"nope\"\napi = \"numpy\"\n" + VALID_BENCH, "environments.bad.image: no folder images/nope"),
    ("[environments.bad]\nimage = \"../runner\"\napi = \"numpy\"\n" + VALID_BENCH, "escapes images/"),
    ("[environments.bad]\nimage = \"/etc\"\napi = \"numpy\"\n" + VALID_BENCH, "escapes images/"),
    ("[run\nname = 1\n", "invalid TOML"),
    ("[run]\nname = \"x\"\nname = \"y\"\n", "invalid TOML"),
    (VALID_BENCH + VALID_BENCH, "repeats cell"),
    ("[report]\nbaseline = { jit = false }\n" + VALID_BENCH,
     "report.baseline: unknown key (did you mean 'baselines'?)"),
    ("[report]\nbaselines = { jitt = false }\n" + VALID_BENCH,
     "report.baselines.jitt: not an axis (did you mean 'jit'?)"),
    ("[report]\nbaselines = { precision = \"float23\" }\n" + VALID_BENCH,
     "report.baselines.precision: 'float23' is not one of"),
    ("[report]\nbaselines = { jit = [false, true] }\n" + VALID_BENCH,
     "report.baselines.jit: one value, not a list"),
    ("[report]\nbaselines = { task = \"run\" }\n" + VALID_BENCH, "report.baselines.task: not an axis"),
    ("[report]\nbaselines = { options.to_hots = true }\n" + VALID_BENCH,
     "report.baselines.options.to_hots: no workload of this matrix has that option (did you mean 'to_host'?)"),
    ("[report]\nbaselines = { options.n = \"big\" }\n" + VALID_BENCH,
     "report.baselines.options.n: expected int, got 'big'"),
    ("[report]\nbaseline_environment = \"nmupy\"\n" + VALID_BENCH,
     "report.baseline_environment: unknown environment 'nmupy' (did you mean 'numpy'?)"),
    (VALID_BENCH + "check_answers = \"no\"\n", "benchmarks[0].check_answers: expected true or false"),
    (VALID_BENCH + "devices = 0\n", "benchmarks[0].devices: must be a positive whole number"),
    (VALID_BENCH + "devices = [1, 2.5]\n", "benchmarks[0].devices: expected a whole number"),
    (VALID_BENCH + "devices = \"2\"\n", "benchmarks[0].devices: expected a whole number"),
    (VALID_BENCH + "scaling = \"linear\"\n", "benchmarks[0].scaling: 'linear' is not one of"),
]


@pytest.mark.parametrize("text, expected", REJECTIONS, ids=[r[1][:40] for r in REJECTIONS])
def test_invalid_matrix_is_one_line_exit_2_nothing_written(write_matrix, run_cli, results_dir,
                                                           text, expected):
    path = write_matrix(text)
    code, out, err = run_cli(path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(path) in lines[0]
    assert expected in lines[0]
    assert list(results_dir.iterdir()) == []


def test_toml_syntax_error_names_the_line(write_matrix, run_cli):
    path = write_matrix("[run]\nrepeats = 3\nsteps = = 4\n", with_environments=False)
    code, _, err = run_cli(path)
    assert code == 2 and "line 3" in err


def test_missing_file(run_cli, tmp_path, results_dir):
    code, _, err = run_cli(tmp_path / "absent.toml")
    assert code == 2 and "absent.toml: no such file" in err
    assert list(results_dir.iterdir()) == []


def test_missing_environments_and_benchmarks(write_matrix, run_cli):
    code, _, err = run_cli(write_matrix("[run]\nsteps = 3\n", with_environments=False))
    assert code == 2 and "environments: missing required key" in err


def test_unknown_only_pattern_is_usage_error(write_matrix, run_cli):
    code, _, err = run_cli(write_matrix(VALID_BENCH), "--only", "nothing-like-this")
    assert code == 2 and "no cell" in err


def test_bad_cli_usage_is_one_line(run_cli):
    code, _, err = run_cli("matrix.toml", "--profile", "fast")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "invalid choice" in err


def test_unknown_subcommand_suggests(run_cli):
    code, _, err = run_cli("reprot")
    assert code == 2 and "did you mean 'report'?" in err


def test_the_report_table_and_check_answers_reach_the_manifest(write_matrix, tmp_path):
    """[report] baselines and baseline_environment, and check_answers = false, travel with the
    run (report RUN_DIR reads them from its manifest)."""
    import json

    from runner import cli

    path = write_matrix(matrix_text(
        None, steps=2, executor="local", profile=None, environments=["numpy", "keras-jax"],
        tables={"report": {"baselines": {"options": {"sleep_ms": 2.0}},
                           "baseline_environment": "numpy"}},
        benchmarks=[{"workload": "selftest", "environments": ["numpy"],
                     "options": {"sleep_ms": [1.0, 2.0]}, "check_answers": False}]),
        with_environments=False)
    assert cli.main([str(path), "--results-dir", str(tmp_path / "results")]) == 0
    (run,) = (tmp_path / "results" / "run").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["report"] == {"baselines": {"options": {"sleep_ms": 2.0}},
                                  "baseline_environment": "numpy"}
    assert [c.get("check_answers") for c in manifest["cells"]] == [False, False]
    report = (run / "report.md").read_text()
    assert "### options.sleep_ms: against options.sleep_ms = 2.0" in report
    assert "Not checked (the matrix sets `check_answers = false`" in report
