"""Per-op profiles end to end, in the real environments on a CPU, one run read by every test:
tiny matmul cells on NumPy, torch, JAX and TensorFlow, and the tiny CNN on Keras 3's three
backends. Two cells are profiled by the run itself (--profile-cells), the rest afterwards by
`python -m runner profile RUN_DIR`; each profile must be a valid gzipped Chrome trace and a
non-empty table, and the run's own figures (summary.csv, results.jsonl, its history rows) must
be what they were before any profile was added."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys

import pytest

from runner import cli
from runner.paths import REPO_ROOT
from tests.matrices import matrix_text

pytestmark = pytest.mark.slow

MATRIX = matrix_text(
    "profiles", steps=3, profile="smoke",
    tables={"profiles": {"smoke": {"size": "tiny"}}, "profiling": {"steps": 2, "warmup": 1}},
    environments=["numpy", "torch", "jax", "tensorflow", "keras-torch", "keras-jax",
                  "keras-tensorflow"],
    benchmarks=[{"workload": "matmul", "environments": ["numpy", "torch", "jax", "tensorflow"]},
                {"workload": "cnn", "batch_size": 16,
                 "environments": ["keras-torch", "keras-jax", "keras-tensorflow"],
                 "options": {"samples": 64}}])
SOURCES = {"numpy": "cProfile", "torch": "torch.profiler", "jax": "jax.profiler",
           "tensorflow": "tf.profiler", "keras-torch": "torch.profiler",
           "keras-jax": "jax.profiler", "keras-tensorflow": "tf.profiler"}


def runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1800)


def history_rows(results):
    with sqlite3.connect(results / "history.sqlite") as db:
        return sorted(db.execute("SELECT * FROM cells").fetchall(), key=repr)


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    matrix = folder / "matrix.toml"
    matrix.write_text(MATRIX, encoding="utf-8")
    results = folder / "results"
    done = runner(str(matrix), "--results-dir", str(results), "--profile-cells", "matmul-run-numpy*",
                  "--profile-cells", "matmul-run-torch*")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = (results / "profiles").iterdir()
    before = {name: (run_dir / name).read_text() for name in ("summary.csv", "results.jsonl")}
    rows_before = history_rows(results)
    later = runner("profile", str(run_dir))
    assert later.returncode == 0, later.stdout[-3000:] + later.stderr[-3000:]
    return {"run_dir": run_dir, "results": results, "first": done.stdout, "later": later.stdout,
            "before": before, "history_before": rows_before}


def test_the_run_profiles_the_cells_it_is_told_to(profiled_run):
    lines = [line for line in profiled_run["first"].splitlines() if line.startswith("◷ profile")]
    assert len(lines) == 2 and all(line.startswith("◷ profile matmul-run-") for line in lines), lines
    assert "ms/step profiled" in lines[0]


def test_every_cell_has_a_valid_trace_and_table(profiled_run):
    run_dir = profiled_run["run_dir"]
    profiles = sorted((run_dir / "profiles").iterdir())
    assert len(profiles) == 7
    for folder in profiles:
        profile = json.loads((folder / "profile.json").read_text())
        assert profile["status"] == "ok", profile
        assert profile["source"] == SOURCES[profile["environment"]]
        assert profile["profiled_step_ms"] > 0 and profile["profile_overhead"] > 0
        assert len(profile["step_ms"]) == 2
        trace = json.loads(gzip.decompress((folder / "trace.json.gz").read_bytes()))
        events = trace["traceEvents"]
        assert events and all("ph" in e for e in events)
        assert all("ts" in e and "dur" in e for e in events if e["ph"] == "X")
        kernels = json.loads((folder / "kernels.json").read_text())
        assert kernels["rows"] and kernels["steps"] >= 1 and kernels["device"] == "cpu"
        if profile["workload"] == "matmul":
            assert kernels["rows"][0]["category"] == "gemm", (profile["environment"],
                                                               kernels["rows"][:3])


def test_profiles_change_none_of_the_runs_figures(profiled_run):
    run_dir = profiled_run["run_dir"]
    for name, text in profiled_run["before"].items():
        assert (run_dir / name).read_text() == text, name
    assert "profile" not in (run_dir / "summary.csv").read_text().splitlines()[0]
    assert history_rows(profiled_run["results"]) == profiled_run["history_before"]


def test_the_report_says_where_the_time_goes(profiled_run):
    report = (profiled_run["run_dir"] / "report.md").read_text()
    assert "## Where the time goes (profiles)" in report
    assert "### cnn (fit) [size=tiny, samples=64], batch 16" in report
    assert "### matmul (run) [size=tiny], batch 1" in report
    assert (profiled_run["run_dir"] / "plots" / "profile-1.png").is_file()
    html = (profiled_run["run_dir"] / "report.html").read_text()
    assert "Where the time goes" in html and "<script" not in html.split("<body")[1]


def test_a_second_profile_run_redoes_nothing(profiled_run):
    again = runner("profile", str(profiled_run["run_dir"]))
    # no pass runs again, and the command says it had nothing to do (issue 57 item 9)
    assert again.returncode == 0 and "◷ profile: no cell to profile" in again.stdout
    assert not [line for line in again.stdout.splitlines()
                if line.startswith("◷ profile ") and "ms/step profiled" in line]


def test_profile_diff_between_two_cells(profiled_run, capsys):
    run_dir = str(profiled_run["run_dir"])
    markdown = profiled_run["run_dir"].parent / "diff.md"
    code = cli.main(["profile", "diff", run_dir, "--env", "keras-torch", "--vs", "keras-jax",
                     "--markdown", str(markdown)])
    out = capsys.readouterr().out
    assert code == 0 and "by category only" in out
    assert markdown.read_text().startswith("## B cnn-fit-keras-jax")
    code = cli.main(["profile", "diff", run_dir, "--env", "keras-torch", "--vs", "nowhere"])
    assert code == 2 and "no row has profiles of both 'keras-torch' and 'nowhere'" in \
        capsys.readouterr().err
