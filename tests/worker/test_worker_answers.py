"""The worker's side of the same-answer check: the fingerprints, the shared seeded inputs, and the
record's `answer` written by the real worker (NumPy: the host's interpreter has it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runner.paths import REPO_ROOT as ROOT
from runner.worker import __main__ as worker
from runner.worker.apis import answers, seeded
from runner.worker.bench import Bench
from runner.worker.protocol import RECORD_FIELDS, CellSpec



def test_the_output_fingerprint_is_its_norms():
    out = answers.output(np.array([[3.0, -4.0], [0.0, 0.0]], np.float32))
    assert out == {"output": {"rms": pytest.approx(2.5), "mean": pytest.approx(-0.25),
                              "max_abs": 4.0}}
    # Every array of a structured output together, dicts in key order.
    both = answers.output({"b": np.ones(2), "a": [np.full(2, 3.0)]})
    assert both["output"]["mean"] == 2.0 and both["output"]["max_abs"] == 3.0
    assert answers.output(np.array([1.0, np.nan, np.inf])) == {"output": {"non_finite": 2}}


def test_tokens_start_where_each_prompt_ends():
    ids = np.array([[1, 2, 9, 8, 7], [1, 5, 6, 4, 3], [0, 0, 0, 0, 0]])
    assert answers.tokens(ids, [2, 1, 0]) == {"tokens": [[9, 8, 7], [5, 6, 4, 3]]}


def test_every_api_draws_the_same_seeded_arrays():
    a, b = seeded.normal(3, (2, 4), (4,))
    rng = np.random.default_rng(3)
    assert np.array_equal(a, rng.standard_normal((2, 4), dtype=np.float32))
    assert np.array_equal(b, rng.standard_normal((4,), dtype=np.float32))
    assert a.dtype == np.float32


def test_answer_is_a_record_field():
    assert RECORD_FIELDS["answer"][0] == "worker"


def test_a_failing_fingerprint_costs_the_answer_not_the_measurement():
    result = {"extra": {}, "loss_first": 2.3}

    def broken():
        raise RuntimeError("no numpy for this dtype")

    assert worker.answer_of(Bench(items_per_step=1, answer=broken), result) is None
    assert result["extra"]["answer_error"] == "RuntimeError: no numpy for this dtype"
    bench = Bench(items_per_step=1, answer=lambda: {"initial_loss": 2.2},
                  first_loss_in_answer=True)
    assert worker.answer_of(bench, result) == {"initial_loss": 2.2, "first_step_loss": 2.3}
    assert worker.answer_of(Bench(items_per_step=1), result) is None


def run_worker(tmp_path: Path, workload: str, options: dict, env: dict | None = None) -> dict:
    spec = CellSpec(run_id="t", cell_id="c", cell_name="c", repeat=1, environment="numpy",
                    api="numpy", backend=None, image="numpy", workload=workload, task="run",
                    batch_size=1, precision="float32", jit="auto", size="tiny", tf32=None,
                    steps_per_execution=1, data="device", device="cpu", options=options,
                    steps=2, warmup_steps=1, seed=0, result_path=str(tmp_path / "result.json"))
    (tmp_path / "spec.json").write_text(json.dumps(spec.to_dict()))
    subprocess.run([sys.executable, "-m", "runner.worker", str(tmp_path / "spec.json"),
                    spec.result_path], cwd=ROOT, check=True, capture_output=True, timeout=120,
                   env={**env} if env else None)
    return json.loads(Path(spec.result_path).read_text())


def test_the_worker_records_the_answer_on_the_seeded_inputs(tmp_path):
    record = run_worker(tmp_path, "matmul", {"n": 32})
    a, b = seeded.normal(0, (1, 32, 32), (1, 32, 32))
    assert record["status"] == "ok"
    assert record["answer"] == answers.output(np.matmul(a, b))


def test_the_selftest_shortcut_scales_the_answer(tmp_path):
    import os

    plain = run_worker(tmp_path, "selftest", {"sleep_ms": 1.0})
    cut = run_worker(tmp_path, "selftest", {"sleep_ms": 1.0},
                     {**os.environ, "DL_BENCH_SELFTEST_SHORTCUT": "0.5"})
    assert cut["answer"]["output"]["rms"] == pytest.approx(plain["answer"]["output"]["rms"] / 2)
    assert cut["effective"]["shortcut"] == 0.5 and "shortcut" not in plain["effective"]
