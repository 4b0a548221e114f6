"""Keras over native (runner/results/analysis/native.py) and the generate cells' time to first token
(runner/results/analysis/decoding.py), from records made as a run stores them: the Keras table's HF
PyTorch columns, its ratio columns, the effects section's tables and the findings' sentences,
the first-token figures in the summaries, summary.csv, report.md and the terminal."""

from __future__ import annotations

import io

import pytest

from runner.results.analysis import answers, decoding, effects, keras_table, native
from runner.results.analysis import summaries as summarize
from runner.results.render import files
from tests.results.rendered import report_of, tables_of

# environment -> (api, backend)
ENVIRONMENTS = {"keras-jax": ("keras", "jax"), "keras-torch": ("keras", "torch"),
                "hf-torch": ("hf", None), "keras2": ("tf-keras", None)}


def records(env: str, workload: str, task: str, medians: list[float], jit=None,
            batch: int = 8, extra: dict | None = None) -> list[dict]:
    """One record per repeat median, as the store keeps them (median_ms added by the host)."""
    api, backend = ENVIRONMENTS[env]
    axes = {**summarize.AXIS_DEFAULTS, **({"jit": jit} if jit is not None else {})}
    base = {"cell_id": f"{env}-{workload}-{task}-{jit}", "cell_name": f"{workload}-{task}-{env}",
            "environment": env, "api": api, "backend": backend, "image": env,
            "workload": workload, "task": task, "batch_size": batch, "items_per_step": batch,
            **axes, "options": summarize.option_preset({"workload": workload, "size": "full"}),
            "status": "ok", "metadata": {}, "effective": {"jit_compile": jit is True}}
    return [{**base, "repeat": i + 1, "samples_ms": [m * 0.99, m, m * 1.01], "median_ms": m,
             "extra": dict(extra or {})} for i, m in enumerate(medians)]


def run_of(rows: dict[tuple[str, str], dict[str, list[float]]]) -> list:
    """Summaries of a run: per (workload, task), per environment (or 'hf-torch+jit'), medians."""
    out = []
    for (workload, task), cells in rows.items():
        for env, medians in cells.items():
            name, _, jit = env.partition("+")
            out += records(name, workload, task, medians, jit=True if jit else None)
    return summarize.cell_summaries(out)


@pytest.fixture
def bert_run():
    return run_of({("bert", "predict"): {"keras-jax": [20.0, 20.4, 19.8],
                                         "keras-torch": [40.0, 41.0, 39.5],
                                         "hf-torch": [10.0, 10.1, 9.9],
                                         "hf-torch+jit": [8.0, 8.1, 7.9]},
                   ("bert", "fit"): {"keras-jax": [50.0, 51.0, 49.0],
                                     "keras-torch": [90.0, 92.0, 88.0],
                                     "hf-torch": [60.0, 61.0, 59.0]}})


def test_the_keras_table_gains_hf_eager_and_compiled_columns_in_the_keras_rows(bert_run):
    view = keras_table.keras_view(bert_run)
    assert view is not None
    rows, columns, titles = view
    assert [titles[c] for c in columns] == ["Keras 3 (JAX)", "Keras 3 (PyTorch) (eager)",
                                           "HF PyTorch (eager)", "HF PyTorch (compiled)"]
    # The compiled cell sits in the Keras row (its jit left out of the label), not a row of its own.
    assert {s["label"] for s in rows} == {"bert (predict)", "bert (fit)"}
    assert {s["label"] for s in bert_run} >= {"bert (predict) [jit=True]"}


def test_keras_over_native_per_backend_and_best_with_intervals(bert_run):
    ratios = native.keras_over_native(keras_table.keras_view(bert_run))
    by = {(r.label, r.keras, r.native): r.estimate for r in ratios}
    jax_eager = by[("bert (predict)", "Keras 3 (JAX)", "HF PyTorch (eager)")]
    assert jax_eager.ratio == pytest.approx(2.0, rel=0.02) and jax_eager.distinguishable
    assert jax_eager.low < 2.0 < jax_eager.high
    best = by[("bert (predict)", native.BEST, "HF PyTorch (compiled)")]
    assert best.ratio == pytest.approx(20.07 / 8.0, rel=0.02)     # JAX is the best Keras 3
    # A row without a compiled HF cell has no ratio against that column.
    assert ("bert (fit)", native.BEST, "HF PyTorch (compiled)") not in by
    assert by[("bert (fit)", native.BEST, "HF PyTorch (eager)")].ratio == pytest.approx(
        50.0 / 60.0, rel=0.02)
    mean, rows = native.overall(ratios, native.BEST, "HF PyTorch (eager)")
    assert rows == 2 and mean.ratio == pytest.approx((2.0 * 50 / 60) ** 0.5, rel=0.02)
    assert mean.has_interval


def test_a_cell_with_a_different_answer_stays_out_of_the_mean(bert_run):
    for s in bert_run:
        if s["environment"] == "keras-jax" and s["task"] == "fit":
            s["answer_differs"] = True
    ratios = native.keras_over_native(keras_table.keras_view(bert_run))
    _, rows = native.overall(ratios, "Keras 3 (JAX)", "HF PyTorch (eager)")
    assert rows == 1


def test_the_report_shows_the_ratios_in_the_keras_table_the_effects_and_the_findings(bert_run):
    manifest = {"name": "t", "run_id": "t/1", "host": {}, "environments": {}}
    text = report_of(manifest, bert_run, analysis=effects.analyse(bert_run))
    table = text.split("## The Keras 3 benchmark table")[1].split("\n## ")[0]
    assert "| HF PyTorch (eager) | HF PyTorch (compiled) |" in table
    assert "Best Keras 3 ÷ HF PyTorch (eager) | Best Keras 3 ÷ HF PyTorch (compiled) |" in table
    # The headline is the geometric mean of the repeat medians (20.07 for 20.0, 20.4, 19.8).
    assert "| bert (predict) | 8 | 20.1 | 40.2 | 10.0 | **8.00** |" in table
    section = text.split("### Keras over native (Hugging Face PyTorch)")[1]
    assert "#### Against HF PyTorch (eager)" in section and "#### Against HF PyTorch (compiled)" \
        in section
    assert "| **Geometric mean** |" in section
    findings = text.split("## Findings")[1].split("\n## ")[0]
    assert "- Keras over native: The best Keras 3 backend takes 1.29× the time of HF PyTorch " \
           "(eager) (95 % CI 1.26–1.33), geometric mean over 2 rows." in findings
    assert "Keras 3 (PyTorch) (eager) takes 5.02× the time of HF PyTorch (compiled) (95 % CI " \
           "4.75–5.31), bert (predict), batch 8." in findings


def on_a100(run: list, tf32: dict[str, bool]) -> list:
    """The run's cells as an A100 records them: each environment's matmul path TF32 or not."""
    for s in run:
        s["tf32_paths"] = {"matmul": tf32[s["environment"]]}
        s["tf32_effective"] = tf32[s["environment"]]
    return run


A100_TF32 = {"keras-jax": True, "keras-torch": False, "hf-torch": False}


def test_keras_over_native_compares_like_with_like_and_marks_tf32_ratios(bert_run):
    """Before: JAX's TF32 cell was "the best Keras 3" against HF's full-float32 one (0.400× on
    such records) and entered the mean unmarked."""
    run = on_a100(bert_run, A100_TF32)
    view = keras_table.keras_view(run)
    ratios = native.keras_over_native(view)
    by = {(r.label, r.keras, r.native): r for r in ratios}
    jax = by[("bert (fit)", "Keras 3 (JAX)", "HF PyTorch (eager)")]
    assert jax.tf32_mixed and not jax.in_means
    best = by[("bert (fit)", native.BEST, "HF PyTorch (eager)")]
    # Like with like: keras-torch (full float32, 90 ms) rather than JAX (TF32, 50 ms).
    assert best.keras_cell["environment"] == "keras-torch" and best.narrowed
    assert not best.tf32_mixed and best.estimate.ratio == pytest.approx(1.5, rel=0.02)
    assert native.ratio_cell(jax).endswith("†")
    mean, rows = native.overall(ratios, "Keras 3 (JAX)", "HF PyTorch (eager)")
    assert rows == 0 and mean.ratio is None
    said = native.sentences(native.keras_over_native(view))
    assert not any("Keras 3 (JAX) takes" in s for s in said)
    assert any(s.startswith("Keras over native: The best Keras 3 backend of the native cell's "
                            "arithmetic (TF32 or full float32) takes 2.45× the time of HF PyTorch "
                            "(eager)") for s in said)
    assert any("ratio(s) compare a Keras cell" in s and "†" in s for s in said)
    text = report_of({"name": "t", "host": {}}, run, analysis=effects.analyse(run))
    section = text.split("#### Against HF PyTorch (eager)")[1].split("\n#### ")[0]
    assert "| bert (fit) | 8 | 0.833× (" in section and ") † |" in section
    assert native.TF32_RATIO_NOTE in section


def test_with_no_keras_cell_of_the_native_arithmetic_best_is_marked(bert_run):
    run = on_a100(bert_run, {**A100_TF32, "keras-torch": True})
    ratios = native.keras_over_native(keras_table.keras_view(run))
    best = next(r for r in ratios if r.keras == native.BEST and r.label == "bert (fit)")
    assert best.keras_cell["environment"] == "keras-jax" and best.tf32_mixed
    assert not best.in_means and not best.narrowed


def test_the_terminal_keras_table_has_the_ratio_columns(bert_run):
    from rich.console import Console

    keras_table = tables_of(bert_run, "t")[0]
    console = Console(file=io.StringIO(), width=400)
    console.print(keras_table)
    text = console.file.getvalue()
    headers = [c.header.replace("\n", " ") for c in keras_table.columns]
    assert "HF PyTorch (compiled)" in headers and "best Keras 3 ÷ HF PyTorch (eager)" in headers
    assert "2.51×" in text                  # best Keras 3 (JAX, 20.07) ÷ HF compiled (8.00)


def test_no_native_columns_without_hf_cells():
    run = run_of({("bert", "predict"): {"keras-jax": [20.0], "keras-torch": [40.0]}})
    view = keras_table.keras_view(run)
    assert native.keras_over_native(view) == [] and native.sentences([]) == []
    text = report_of({"name": "t", "host": {}}, run, analysis=effects.analyse(run))
    assert "÷ HF" not in text and "Keras over native" not in text


# --- time to first token ----------------------------------------------------------------------

def test_first_token_and_decode_latency_per_repeat_and_per_cell():
    reps = records("hf-torch", "gemma", "generate", [400.0, 420.0, 410.0],
                   extra={"prefill_ms": [22.0, 20.0, 21.0], "generated_tokens": 40,
                          "tokens_per_s": 1000.0, "new_tokens_per_call": 320})
    assert decoding.repeat_first_token(reps[0]) == (21.0, pytest.approx((400 - 21) / 39))
    (cell,) = summarize.cell_summaries(reps)
    call = (400.0 * 420.0 * 410.0) ** (1 / 3)
    assert cell["geomean_ms"] == pytest.approx(call)
    assert cell["ttft_ms"] == pytest.approx(21.0)
    # One estimator (issue 49): the cell's time, its decode latency and its tokens/s all from
    # the geometric mean of the repeat medians; the worker's own mean rate (1000) is not used.
    assert cell["decode_ms_per_token"] == pytest.approx((call - 21) / 39)
    assert cell["tokens_per_s"] == pytest.approx(320 * 1000 / call)
    header, row = files.summary_csv([cell]).splitlines()
    assert "ttft_ms,decode_ms_per_token,tokens_per_s" in header
    assert ",21.0," in row


def test_the_first_token_table_uses_the_tables_estimator():
    """Before: its "ms per call" was the median of the repeat medians (1.0 for repeats 1, 1, 3)
    beside a Keras table showing their geometric mean (1.44)."""
    reps = records("hf-torch", "gemma", "generate", [1.0, 1.0, 3.0],
                   extra={"prefill_ms": [0.2], "generated_tokens": 4, "new_tokens_per_call": 32})
    cells = summarize.cell_summaries(reps)
    section = "\n".join(decoding.markdown_lines(cells))
    assert "| gemma (generate) | 8 | hf-torch | 1.44 | 0.200 |" in section


def work(prompt: int, new: int, prefill: int) -> dict:
    return {"prompt_positions": prompt, "new_tokens_per_sequence": new, "decode_iterations": new,
            "prefill_positions": prefill}


def generate_row(keras_work: dict, hf_work: dict) -> list:
    out = []
    for env, medians, done in (("keras-jax", [900.0], keras_work), ("keras-torch", [950.0],
                               keras_work), ("hf-torch", [400.0], hf_work)):
        reps = records(env, "gemma", "generate", medians,
                       extra={"prefill_ms": [30.0], "generated_tokens": done[
                           "new_tokens_per_sequence"], "new_tokens_per_call": 8})
        for r in reps:
            r["effective"] |= done
            r["answer"] = {"next_token_logits": {"rms": 1.0}}
        out += reps
    cells = summarize.cell_summaries(out)
    return answers.checked(cells)


def test_generate_cells_that_do_other_work_are_marked_like_a_different_answer():
    """Before: keras-hub's loop ran 42 iterations from the shortest prompt where HF made 40
    tokens after the longest, and nothing said so."""
    cells = generate_row(work(8, 42, 50), work(10, 40, 10))
    by = {c["environment"]: c for c in cells}
    assert by["hf-torch"]["answer_check"] == answers.DIFFERENT_WORK
    assert by["hf-torch"]["answer_differs"] and not by["keras-jax"]["answer_differs"]
    assert "decode iterations 40 against 42" in by["hf-torch"]["answer_detail"]
    assert by["hf-torch"]["generate_work"]["prefill_positions"] == 10
    view = keras_table.keras_view(cells)
    assert all(r.differs for r in native.keras_over_native(view))
    section = "\n".join(decoding.markdown_lines(cells, decoding.keras_titles(view)))
    assert "| HF PyTorch (eager) ≠ |" in section and "| 10 / 40 | 40 | 10 |" in section


def test_generate_cells_doing_the_same_work_pass_with_their_own_prefill():
    cells = generate_row(work(8, 42, 50), work(8, 42, 8))
    assert {c["answer_check"] for c in cells} == {answers.SAME}
    titles = decoding.keras_titles(keras_table.keras_view(cells))
    section = "\n".join(decoding.markdown_lines(cells, titles))
    assert "| 8 / 42 | 42 | 50 |" in section and "| 8 / 42 | 42 | 8 |" in section


@pytest.mark.parametrize("extra", [{}, {"prefill_ms": "fast"}, {"prefill_ms": [float("nan")]},
                                   {"prefill_ms": [5.0], "generated_tokens": 1},
                                   {"prefill_ms": [5.0], "generated_tokens": "40"}])
def test_missing_or_hostile_first_token_figures_are_unknown_never_made_up(extra):
    (cell,) = summarize.cell_summaries(records("hf-torch", "gemma", "generate", [400.0],
                                               extra=extra))
    assert cell["decode_ms_per_token"] is None
    if not isinstance(extra.get("prefill_ms"), list) or extra["prefill_ms"] != [5.0]:
        assert cell["ttft_ms"] is None


def test_the_report_and_the_terminal_show_time_to_first_token():
    reps = records("keras-jax", "gemma", "generate", [900.0],
                   extra={"prefill_ms": [300.0], "generated_tokens": 42})
    reps += records("hf-torch", "gemma", "generate", [400.0],
                    extra={"prefill_ms": [20.0], "generated_tokens": 40})
    cells = summarize.cell_summaries(reps)
    text = report_of({"name": "t", "host": {}}, cells)
    section = text.split("## Generate: time to first token")[1].split("\n## ")[0]
    assert "| gemma (generate) | 8 | Keras 3 (JAX) | 900 | 300 | 14.6 | – |" in section
    assert "| gemma (generate) | 8 | HF PyTorch (eager) | 400 | 20.0 | 9.74 | – |" in section
    from rich.console import Console

    console = Console(file=io.StringIO(), width=300)
    for table in tables_of(cells, "t"):
        console.print(table)
    assert "Generate: time to first token" in console.file.getvalue()


def test_the_method_line_says_how_fit_rows_were_synchronised(bert_run):
    """Before: keras-hub fit read its loss every call while HF fit synchronised once per block,
    and nothing said so; now both are timed call by call and the method line states it."""
    from runner.results.analysis import findings

    said = findings.method_sentence(bert_run)
    assert "Fit rows of the Keras table are timed the same way on every side: call by call, " \
           "each step's loss read back to the host" in said and "except" not in said
    older = [dict(s, calls_per_sample=8) if s["api"] == "hf" and s["task"] == "fit" else s
             for s in bert_run]
    assert "except bert-fit-hf-torch (timed in blocks" in findings.method_sentence(older)
    predict_only = [s for s in bert_run if s["task"] == "predict"]
    assert "Fit rows" not in findings.method_sentence(predict_only)


def test_keras_hub_decode_latency_is_taken_over_the_same_buffer():
    """Issue 59 item 7: keras-hub's first-token call prefills prompt + 1 positions while a timed
    call prefills its whole buffer, so (T(N) − T(1)) / (N − 1) carried the difference of the two
    prefills on Keras only. T(1) is now a one-new-token call over the timed call's own buffer
    (`decode_base_ms`), and the first token names the loop iteration keras-hub's includes."""
    first = {"prefill_positions": 9, "decode_iterations": 1, "loop_iterations_after_prefill": 1}
    reps = records("keras-jax", "gemma", "generate", [900.0],
                   extra={"prefill_ms": [300.0], "decode_base_ms": [340.0, 360.0, 350.0],
                          "generated_tokens": 42, "first_token_call": first})
    assert decoding.repeat_first_token(reps[0]) == (300.0, pytest.approx((900 - 350) / 41))
    (cell,) = summarize.cell_summaries(reps)
    assert cell["ttft_ms"] == pytest.approx(300.0) and cell["ttft_loop_iterations"] == 1
    assert cell["decode_ms_per_token"] == pytest.approx((900 - 350) / 41)   # not (900 − 300)
    section = "\n".join(decoding.markdown_lines([cell]))
    assert "| 900 | 300 (+1 loop iteration) | 13.4 |" in section
    assert "the prompts extended to max_length − 1" in section


def test_the_keras_tables_best_columns_name_their_backends():
    """Issue 59 item 8: in one row the "Best Keras 3" column named JAX's time (the fastest)
    while "Best Keras 3 ÷ HF" was keras-torch's (TF32 narrowed it to the native cell's
    arithmetic), and nothing said so. The ratio cell names its backend, the legend says why."""
    run = on_a100(run_of({("bert", "fit"): {"keras-jax": [50.0, 51.0, 49.0],
                                            "keras-torch": [90.0, 92.0, 88.0],
                                            "keras2": [120.0, 121.0, 119.0],
                                            "hf-torch": [60.0, 61.0, 59.0]}}),
                  {**A100_TF32, "keras2": False})
    text = report_of({"name": "t", "host": {}}, run, analysis=effects.analyse(run))
    table = text.split("## The Keras 3 benchmark table")[1].split("\n## ")[0]
    row = next(line for line in table.splitlines() if line.startswith("| bert (fit)"))
    assert "| 50.0 (jax) |" in row                          # Best Keras 3: JAX's 50 ms
    assert row.endswith("| 1.50× (1.40–1.61) (torch) |")   # ÷ HF eager: keras-torch's 90 ms
    assert "another backend than the Best Keras 3 column's where TF32 narrowed it" in table
