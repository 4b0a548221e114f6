"""The report model (runner/results/analysis/report_model.py): a report's analysis made once
and handed to every renderer. Calls are counted at the functions' own code (sys.setprofile), so
a renderer calling one under any name counts too; nothing is replaced."""

from __future__ import annotations

import io
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from tests.fixtures import FIXTURE_RUNS
from tests.results.analysis.test_native import on_a100, run_of

from runner.results.analysis import (conditions, cost, decoding, effects, findings,
                                     keras_table, native, reference, report_model, scaling,
                                     speedups, summaries)
from runner.results.data.store import Store
from runner.results.render import markdown, terminal
from runner.results.render.write import write_reports
from runner.run.console import show_results

ONCE: dict[str, Callable] = {
    "keras_view": keras_table.keras_view, "keras_over_native": native.keras_over_native,
    "analyse": effects.analyse, "findings.of": findings.of,
    "method_sentence": findings.method_sentence, "native.sentences": native.sentences,
    "cost.sentences": cost.sentences, "scaling_rows": scaling.scaling_rows,
    "fixed_costs": summaries.fixed_costs, "beside": reference.beside,
    "cell_summaries": summaries.cell_summaries}
# Entered by other analysis too; never by a renderer.
INSIDE: dict[str, Callable] = {"tf32_rows": summaries.tf32_rows,
                               "keras_speedups": speedups.keras_speedups,
                               "pivot": summaries.pivot, "to_act_on": conditions.to_act_on,
                               "keras_titles": decoding.keras_titles,
                               "speedup": speedups.speedup}


@contextmanager
def counted() -> Iterator[Counter]:
    """How often each function of ONCE and INSIDE is entered, by its code object (and under
    "render: NAME", how often from a renderer's own code); "table_view": the tables' views."""
    functions = {**ONCE, **INSIDE, "table_view": report_model.table_view}
    codes = {f.__code__: name for name, f in functions.items()}
    calls: Counter = Counter()

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1
            caller = frame.f_back.f_code.co_filename      # write.py makes the model
            if "/results/render/" in caller and not caller.endswith("/write.py"):
                calls[f"render: {codes[frame.f_code]}"] += 1

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(before)


def test_a_fixture_runs_reports_and_terminal_tables_analyse_it_once(tmp_path):
    """`python -m runner report` on the base fixture: report.md, report.html, the plots and
    the terminal's tables, from one model (before it, keras_view ran twice, tf32_rows and the
    pivot once per table of each renderer)."""
    run = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", run)
    console = Console(file=io.StringIO(), width=160)
    with counted() as calls:
        model = write_reports(Store(run), Store(run).read_manifest())
        show_results(model, "base", run, console)
    assert (run / "report.md").is_file() and "## Findings" in (run / "report.md").read_text()
    assert "Workload (task)" in console.file.getvalue()
    assert model.keras is None and model.analysis is not None and model.findings
    assert {name: calls[name] for name in ONCE} == dict.fromkeys(ONCE, 1)
    assert calls["table_view"] == 1                   # one table here: no Keras table
    assert not [name for name in calls if name.startswith("render: ")], calls


def test_a_keras_table_with_native_columns_is_analysed_once_for_both_renderers():
    cells = on_a100(run_of({("bert", "predict"): {"keras-jax": [20.0, 20.4, 19.8],
                                                  "keras-torch": [40.0, 41.0, 39.5],
                                                  "hf-torch": [10.0, 10.1, 9.9]}}),
                    {"keras-jax": True, "keras-torch": False, "hf-torch": False})
    with counted() as calls:
        model = report_model.build({"name": "t"}, cells, effects.analyse(cells))
        text = markdown.report_markdown(model)
        console = Console(file=io.StringIO(), width=200)
        for table in terminal.tables(model, "t"):
            console.print(table)
    assert model.keras_table is not None and model.keras_table.natives == ["HF PyTorch (eager)"]
    assert "### Keras over native (Hugging Face PyTorch)" in text
    assert "best Keras 3 ÷" in console.file.getvalue()
    assert {name: calls[name] for name in ONCE if name != "cell_summaries"} == \
        {name: 1 for name in ONCE if name != "cell_summaries"}
    assert calls["table_view"] == 2                   # the Keras table and every cell's
    assert not [name for name in calls if name.startswith("render: ")], calls


def test_the_model_holds_what_the_renderers_used_to_compute():
    cells = run_of({("bert", "predict"): {"keras-jax": [20.0, 20.4, 19.8],
                                          "hf-torch": [10.0, 10.1, 9.9]}})
    model = report_model.build({"name": "t"}, cells, effects.analyse(cells))
    assert model.keras == keras_table.keras_view(cells)
    assert model.native == native.keras_over_native(model.keras)
    assert model.method == findings.method_sentence(cells)
    assert model.cells_table.tf32_rows == summaries.tf32_rows(cells)
    assert model.keras_table is not None
    assert model.keras_table.native_ratios == native.best_of(model.native)
    assert set(model.column_titles.values()) == {"Keras 3 (JAX)", "HF PyTorch (eager)"}
    bare = report_model.build({"name": "t"}, cells)              # no effects: no findings
    assert bare.analysis is None and not bare.findings
