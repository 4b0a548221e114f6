"""compile_s cold or warm, and said which: the local executor gives every worker empty
compilation caches in its attempt folder (as a new container has) unless [run]
keep_compile_caches = true; every record carries compile_cache = "fresh" | "kept"."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from tests.executors.attempts import attempt_in
from tests.matrices import matrix_text

from runner import cli
from runner.environments import Source
from runner.executors.base import Attempt, Prepared
from runner.executors.local import (COMPILE_CACHE_DIR, COMPILE_CACHE_FOLDERS, LocalExecutor,
                                    compile_cache_environment)
from runner.worker.protocol import COMPILE_CACHE_ENV

CACHE_VARIABLES = sorted(COMPILE_CACHE_FOLDERS)


def test_fresh_caches_live_in_the_attempt_folder(tmp_path):
    env = compile_cache_environment(tmp_path, {}, {})
    assert env[COMPILE_CACHE_ENV] == "fresh"
    assert {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH"} <= set(env)
    for name in CACHE_VARIABLES:
        assert Path(env[name]).parent == tmp_path / COMPILE_CACHE_DIR, name


def test_kept_caches_are_the_users(tmp_path):
    assert compile_cache_environment(tmp_path, {}, {COMPILE_CACHE_ENV: "kept"}) == \
        {COMPILE_CACHE_ENV: "kept"}
    # A cache folder the matrix's env names is the user's choice: it wins, and is not "fresh".
    assert compile_cache_environment(tmp_path, {}, {"TRITON_CACHE_DIR": "/data/triton"}) == \
        {COMPILE_CACHE_ENV: "kept"}


def test_jax_cache_redirected_only_where_it_is_switched_on(tmp_path):
    """Setting JAX_COMPILATION_CACHE_DIR would switch JAX's persistent cache on (and its writes
    into compile_s): it is only redirected when the worker would have it on already (inherited
    through DL_BENCH_INHERIT_ENV)."""
    assert "JAX_COMPILATION_CACHE_DIR" not in compile_cache_environment(tmp_path, {}, {})
    env = compile_cache_environment(tmp_path, {"JAX_COMPILATION_CACHE_DIR": "/home/me/.jax"}, {})
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / COMPILE_CACHE_DIR / "jax")


class EnvDump(LocalExecutor):
    """The real executor, with a worker that writes the variables it was given and one file
    into each cache folder (what a compiler would leave there)."""

    def command(self, prepared, attempt):
        script = textwrap.dedent(f"""
            import json, os, pathlib
            names = {CACHE_VARIABLES + [COMPILE_CACHE_ENV]!r}
            seen = {{n: os.environ.get(n) for n in names}}
            for n in {CACHE_VARIABLES!r}:
                pathlib.Path(seen[n]).mkdir(parents=True, exist_ok=True)
                (pathlib.Path(seen[n]) / "kernel.bin").write_bytes(b"x")
            pathlib.Path("seen.json").write_text(json.dumps(seen))
        """) if attempt.env.get(COMPILE_CACHE_ENV) != "kept" else textwrap.dedent(f"""
            import json, os, pathlib
            names = {CACHE_VARIABLES + [COMPILE_CACHE_ENV]!r}
            pathlib.Path("seen.json").write_text(json.dumps({{n: os.environ.get(n) for n in names}}))
        """)
        return [sys.executable, "-c", script]


def attempt(tmp_path: Path, env: dict[str, str]) -> Attempt:
    return attempt_in(tmp_path, env, timeout=60, device="cpu")


def test_a_local_worker_compiles_into_empty_caches_that_go_with_it(tmp_path):
    job = attempt(tmp_path, {})
    prepared = Prepared(Source(folder="numpy").key, "test", python=Path(sys.executable))
    outcome = EnvDump().run(prepared, job)
    assert outcome.returncode == 0, outcome.log_tail
    seen = json.loads((job.work_dir / "seen.json").read_text())
    assert seen[COMPILE_CACHE_ENV] == "fresh"
    for name in CACHE_VARIABLES:
        assert seen[name].startswith(str(job.work_dir / COMPILE_CACHE_DIR)), name
    assert not (job.work_dir / COMPILE_CACHE_DIR).exists()      # removed after the worker


def test_kept_caches_leave_the_users_variables_alone(tmp_path):
    job = attempt(tmp_path, {COMPILE_CACHE_ENV: "kept", "TRITON_CACHE_DIR": "/home/me/.triton/cache"})
    prepared = Prepared(Source(folder="numpy").key, "test", python=Path(sys.executable))
    assert EnvDump().run(prepared, job).returncode == 0
    seen = json.loads((job.work_dir / "seen.json").read_text())
    assert seen[COMPILE_CACHE_ENV] == "kept"
    assert seen["TRITON_CACHE_DIR"] == "/home/me/.triton/cache"
    assert seen["TORCHINDUCTOR_CACHE_DIR"] is None or "compile-cache" not in seen["TORCHINDUCTOR_CACHE_DIR"]


@pytest.mark.slow
@pytest.mark.parametrize("keep, expected", [({}, "fresh"), ({"keep_compile_caches": True}, "kept")],
                         ids=["fresh", "kept"])
def test_every_record_says_which_caches_compile_s_ran_with(keep, expected, tmp_path):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(matrix_text("caches", steps=2, executor="local", **keep,
                                  benchmarks=[{"workload": "matmul", "environments": ["numpy"],
                                               "options": {"n": 16}}]))
    assert cli.main([str(matrix), "--results-dir", str(tmp_path / "results")]) == 0
    (record_path,) = (tmp_path / "results").glob("caches/*/cells/*.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "ok" and record["compile_cache"] == expected
