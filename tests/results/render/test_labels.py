"""Labels that say what was measured (issue 37 item 8): a blocked cell's spread is between
blocks, and the report's method line says how the numbers were made, GC off in the window
included. (Keras fit's compile_s: tests/worker/test_keras_fit_clock.py.)"""

from __future__ import annotations

from runner.results.analysis import summaries as summarize
from tests.results.rendered import report_of


def record(cell_id: str, calls_per_sample: int) -> dict:
    return {"cell_id": cell_id, "cell_name": cell_id, "environment": cell_id, "api": "jax",
            "backend": None, "image": "jax", "workload": "matmul", "task": "run",
            "batch_size": 1, **summarize.AXIS_DEFAULTS, "options": {"n": 4096}, "repeat": 1,
            "status": "ok", "samples_ms": [1.0, 1.1, 0.9, 1.0, 1.05],
            "calls_per_sample": calls_per_sample, "items_per_step": 1, "metadata": {},
            "extra": {}, "effective": {}}


def test_a_blocked_cells_spread_says_it_is_between_blocks():
    cells = summarize.cell_summaries([record("blocked", 8), record("per-call", 1)])
    assert [c["calls_per_sample"] for c in cells] == [8, 1]
    text = report_of({"name": "t"}, cells)
    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
    assert "| 0.940–1.08 (blocks of 8 calls) |" in rows["blocked"]
    assert "blocks of" not in rows["per-call"]
    assert "the spread between blocks, per step" in text


def test_the_method_line_says_how_the_numbers_were_made():
    cells = summarize.cell_summaries([record("blocked", 8)])
    text = report_of({"name": "t"}, cells)
    method = next(line for line in text.splitlines() if line.startswith("Method: "))
    assert text.index(method) < text.index("## Time per step")
    for said in ("geometric mean of its repeat medians", "min(n) − 1 degrees of freedom",
                 "ahead of every other cell of its row", "Bonferroni",
                 "garbage collector is off inside every timed window",
                 "the same untimed calls in every repeat", "between blocks of calls"):
        assert said in method, said
