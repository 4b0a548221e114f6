"""Where the time goes (runner/results/analysis/profiles.py, results/data/profiles.py): profiles
side by side per row, the sentence that explains a row's gap, the diff of two profiles, and
what is kept of a worker's table and trace (a worker runs code the runner does not control)."""

from __future__ import annotations

import base64
import gzip

from runner.results.analysis import profiles as analysis
from runner.results.data import profiles as stored


def kernels(source, rows, launches, idle, device="cpu"):
    """A kernels.json table: rows as (name, ms per step, calls per step)."""
    table = stored.clean_kernels({
        "source": source, "device": device, "launches_per_step": launches,
        "device_idle_pct": idle, "steps": 3, "step_ms": sum(ms for _, ms, _ in rows),
        "rows": [{"name": n, "us_per_step": ms * 1000, "count_per_step": c} for n, ms, c in rows]})
    assert table is not None
    return table


def profile(env, timed_ms, table, row="cnn (fit)", batch=128):
    return {"status": "ok", "environment": env, "cell_name": f"cnn-fit-{env}-b{batch}",
            "row": row, "batch_size": batch, "timed_median_ms": timed_ms, "kernels": table}


KERAS_TORCH = kernels("torch.profiler", [("aten::convolution_backward", 200, 4),
                                         ("aten::copy_", 80, 60), ("aten::mm", 60, 6)], 251, 40)
TORCH = kernels("torch.profiler", [("aten::convolution_backward", 190, 4),
                                   ("aten::mm", 2, 4), ("aten::addmm", 1, 2)], 122, 5)
JAX = kernels("jax.profiler", [("ynn_fusion.20", 30, 1), ("transpose_copy_fusion.5", 25, 1)],
              116, 7)


def test_a_rows_gap_is_explained_with_numbers():
    row = analysis.rows_of([profile("keras-torch", 364, KERAS_TORCH),
                            profile("torch", 150, TORCH)])[0]
    sentence = analysis.explain(row)
    assert sentence.startswith("cnn (fit), batch 128: keras-torch takes 2.43× the time of torch")
    assert "keras-torch launches 2.06× more ops per step (251 against 122)" in sentence
    assert "40 % of its step is time where no op runs" in sentence
    assert "memcpy 80 ms more (80 against 0)" in sentence
    assert "by category" not in sentence                 # the same profiler: no caveat


def test_across_profilers_the_sentence_says_categories_only():
    row = analysis.rows_of([profile("torch", 300, TORCH), profile("jax", 100, JAX)])[0]
    sentence = analysis.explain(row)
    assert "conv 190 ms more" in sentence and "their profilers name other code" in sentence


def test_no_sentence_without_a_gap_or_a_cause():
    close = analysis.rows_of([profile("torch", 100, TORCH), profile("jax", 105, JAX)])[0]
    assert analysis.explain(close) is None
    alone = analysis.rows_of([profile("torch", 100, TORCH)])[0]
    assert analysis.explain(alone) is None


def test_the_biggest_gap_is_the_findings_one():
    rows = analysis.rows_of([profile("keras-torch", 364, KERAS_TORCH), profile("torch", 300, TORCH),
                             profile("keras-torch", 900, KERAS_TORCH, row="gemma (generate)"),
                             profile("torch", 100, TORCH, row="gemma (generate)")])
    assert analysis.biggest_gap(rows).startswith("gemma (generate), batch 128: keras-torch takes 9×")


def test_a_diff_of_one_profiler_goes_op_by_op():
    result = analysis.diff(profile("torch", 1, TORCH), profile("keras-torch", 1, KERAS_TORCH))
    assert result["op_level"]
    ops = {o["name"]: o for o in result["ops"]}
    assert ops["aten::copy_"]["mark"] == "only in B" and ops["aten::addmm"]["mark"] == "only in A"
    assert ops["aten::mm"]["mark"] == "+" and ops["aten::mm"]["delta_ms"] == 58
    assert ops["aten::convolution_backward"]["mark"] == "="
    assert result["ops"][0]["name"] == "aten::copy_"      # by |Δ|
    categories = {c: delta for c, _, _, delta in result["categories"]}
    assert categories == {"gemm": 57, "conv": 10, "memcpy": 80}


def test_a_diff_across_profilers_stays_at_categories():
    result = analysis.diff(profile("torch", 1, TORCH), profile("jax", 1, JAX))
    assert not result["op_level"] and result["ops"] == []
    assert {c for c, *_ in result["categories"]} == {"gemm", "conv", "elementwise"}


def test_a_workers_table_is_reduced_to_its_schema():
    hostile = {"rows": [{"name": "<img src=x onerror=alert(1)>" + "x" * 1000,
                         "us_per_step": float("nan"), "count_per_step": "many",
                         "category": "<script>", "device": "cpu" * 50},
                        "not a row", {"name": 7}], "steps": "3", "source": "s" * 100,
               "categories": {"gemm": 1e9, "evil": 5}, "per_step": [{"ms": True}, 5]}
    table = stored.clean_kernels(hostile)
    (row,) = table["rows"]
    assert len(row["name"]) == stored.MAX_NAME and row["category"] == "other"
    assert row["us_per_step"] is None and row["count_per_step"] is None
    assert len(row["device"]) == 16 and len(table["source"]) == 40 and table["steps"] is None
    assert table["per_step"] == [{"step": None, "ms": None, "busy_us": None, "idle_pct": None,
                                  "launches": None}]
    assert stored.clean_kernels({"rows": "no"}) is None and stored.clean_kernels([]) is None


def test_a_trace_must_be_gzip_within_its_bound():
    data = gzip.compress(b'{"traceEvents": []}')
    assert stored.trace_bytes(base64.b64encode(data).decode(), 1.0) == data
    assert stored.trace_bytes(base64.b64encode(b"plain text").decode(), 1.0) is None
    assert stored.trace_bytes("not base64 !!", 1.0) is None
    assert stored.trace_bytes(base64.b64encode(data).decode(), 1e-6) is None
    assert stored.trace_bytes(None, 1.0) is None
