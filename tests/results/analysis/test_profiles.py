"""Where the time goes (runner/results/analysis/profiles.py, results/data/profiles.py): profiles
side by side per row, the sentence that explains a row's gap, the diff of two profiles, and
what is kept of a worker's table and trace (a worker runs code the runner does not control)."""

from __future__ import annotations

import base64
import gzip

from runner.results.analysis import profiles as analysis, summaries as summarize
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
    """A profile as profile.json holds it; `timed_ms` the median of medians it was written with
    (never what the analysis reads: judge_rows takes the summaries')."""
    return {"status": "ok", "environment": env, "cell_name": f"cnn-fit-{env}-b{batch}",
            "cell_id": cell_id(env, row), "row": row, "batch_size": batch,
            "timed_median_ms": timed_ms, "kernels": table}


def cell_id(env, row="cnn (fit)"):
    return f"{env}-{row.split()[0]}"


def summary(env, medians, row="cnn (fit)", warned=False):
    """The cell's summary from repeats whose medians are `medians` (5 steps each)."""
    records = [{"cell_id": cell_id(env, row), "cell_name": f"{row}-{env}", "environment": env,
                "api": "torch", "backend": None, "image": env, "workload": "cnn", "task": "fit",
                "batch_size": 128, **summarize.AXIS_DEFAULTS, "options": {}, "repeat": i + 1,
                "status": "ok", "samples_ms": [m] * 5, "metadata": {}, "extra": {},
                "effective": {}} for i, m in enumerate(medians)]
    (out,) = summarize.cell_summaries(records)
    if warned:
        out["warnings"] = ["repeats disagree"]
    return out


def three(ms):
    """Three repeats within ±1 % of `ms`."""
    return [ms * 0.99, ms, ms * 1.01]


def judged(profiles, summaries):
    found = analysis.Profiled(analysis.rows_of(profiles))
    analysis.judge_rows(found, summaries)
    return found.rows


KERAS_TORCH = kernels("torch.profiler", [("aten::convolution_backward", 200, 4),
                                         ("aten::copy_", 80, 60), ("aten::mm", 60, 6)], 251, 40)
TORCH = kernels("torch.profiler", [("aten::convolution_backward", 190, 4),
                                   ("aten::mm", 2, 4), ("aten::addmm", 1, 2)], 122, 5)
JAX = kernels("jax.profiler", [("ynn_fusion.20", 30, 1), ("transpose_copy_fusion.5", 25, 1)],
              116, 7)


def test_a_rows_gap_is_explained_with_numbers():
    (row,) = judged([profile("keras-torch", 364, KERAS_TORCH), profile("torch", 150, TORCH)],
                    [summary("keras-torch", three(364)), summary("torch", three(150))])
    sentence = row.sentence
    assert sentence.startswith("cnn (fit), batch 128: keras-torch takes 2.43× (95 % CI 2.3")
    assert "the time of torch (364 against 150 ms/step, geometric means" in sentence
    assert "keras-torch launches 2.06× more ops per step (251 against 122)" in sentence
    assert "40 % of its step is time where no op runs" in sentence
    assert "memcpy 80 ms more (80 against 0)" in sentence
    assert "by category" not in sentence                 # the same profiler: no caveat


def test_the_gap_is_the_tables_estimator_with_its_interval():
    """Issue 59 item 3: a finding said "28.4×" (the profiles' own medians) beside the table's
    6.53× (the geometric means): the sentence now reads the summaries."""
    (row,) = judged([profile("keras-torch", 284, KERAS_TORCH), profile("torch", 10, TORCH)],
                    [summary("keras-torch", three(65.3)), summary("torch", three(10))])
    assert "takes 6.53× (95 % CI" in row.sentence and "28.4" not in row.sentence


def test_no_sentence_for_a_gap_within_noise_or_a_warned_cell():
    profiles = [profile("keras-torch", 364, KERAS_TORCH), profile("torch", 150, TORCH)]
    # one repeat a side: no interval, so never beyond noise
    assert judged(profiles, [summary("keras-torch", [364]), summary("torch", [150])])[0] \
        .sentence is None
    # repeats spread so wide the interval covers 1
    assert judged(profiles, [summary("keras-torch", [100, 364, 900]),
                             summary("torch", [90, 150, 400])])[0].sentence is None
    assert judged(profiles, [summary("keras-torch", three(364), warned=True),
                             summary("torch", three(150))])[0].sentence is None


def test_across_profilers_the_sentence_says_categories_only():
    (row,) = judged([profile("torch", 300, TORCH), profile("jax", 100, JAX)],
                    [summary("torch", three(300)), summary("jax", three(100))])
    assert "conv 190 ms more" in row.sentence and "their profilers name other code" in row.sentence


def test_no_sentence_without_a_gap_or_a_cause():
    (close,) = judged([profile("torch", 100, TORCH), profile("jax", 105, JAX)],
                      [summary("torch", three(100)), summary("jax", three(105))])
    assert close.sentence is None
    (alone,) = judged([profile("torch", 100, TORCH)], [summary("torch", three(100))])
    assert alone.sentence is None


def test_the_biggest_gap_is_the_findings_one():
    gemma = "gemma (generate)"
    rows = judged([profile("keras-torch", 364, KERAS_TORCH), profile("torch", 300, TORCH),
                   profile("keras-torch", 900, KERAS_TORCH, row=gemma),
                   profile("torch", 100, TORCH, row=gemma)],
                  [summary("keras-torch", three(364)), summary("torch", three(300)),
                   summary("keras-torch", three(900), row=gemma),
                   summary("torch", three(100), row=gemma)])
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
