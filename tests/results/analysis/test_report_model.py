"""The report model (runner/results/analysis/report_model.py): a report's analysis made once
and handed to every renderer, and a run analysed once (analyse_run) for its reports and its
history. Calls are counted at the functions' own code (sys.setprofile), so a renderer calling
one under any name counts too; nothing is replaced."""

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
from runner.history import db, ingest
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
def counted(**more: Callable) -> Iterator[Counter]:
    """How often each function of ONCE, INSIDE and `more` is entered, by its code object (and
    under "render: NAME", how often from a renderer's own code); "table_view": the tables'
    views."""
    functions = {**ONCE, **INSIDE, "table_view": report_model.table_view, **more}
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
        model = write_reports(Store(run), report_model.analyse_run(Store(run)))
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


def history_rows(engine) -> dict[str, list[dict]]:
    """Every row of the history but when and how it was imported."""
    from runner.history import tables

    with engine.connect() as conn:
        return {table.name: [{k: v for k, v in row._mapping.items()
                              if k not in ("imported_at", "origin")}
                             for row in conn.execute(table.select().order_by(*table.primary_key))]
                for table in tables.metadata.sorted_tables}


def test_a_runs_records_are_read_once_for_its_reports_and_its_history(tmp_path):
    """The run's end as the pipeline does it: one analysis, its reports, then its history from
    the same analysis; every record file read once, the cells summarised once, no record file
    hashed again for the history. An old run's `history import` analyses the folder itself and
    stores the same rows."""
    run = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", run)
    files = len(list((run / "cells").glob("*.json")))
    engine = db.open_history(f"sqlite:///{tmp_path / 'run.sqlite'}")
    with counted(read_record=Store.read_record, sha256=ingest.sha256) as calls:
        analysed = report_model.analyse_run(Store(run))
        write_reports(Store(run), analysed)
        done = ingest.import_run(engine, run, origin="run", analysed=analysed)
    assert done.action == "added" and done.cells == len(analysed.summaries) == 8
    assert calls["read_record"] == files == len(analysed.records)
    assert calls["cell_summaries"] == 1 and calls["analyse"] == 1
    assert calls["sha256"] == 1                     # the manifest's; the records' were read once
    later = db.open_history(f"sqlite:///{tmp_path / 'import.sqlite'}")
    assert ingest.import_run(later, run).action == "added"
    assert history_rows(later) == history_rows(engine)
    # The history keeps the summaries without the answers' verdicts, the report with them.
    assert not any("answer_check" in s for s in analysed.summaries)
    assert all(s["answer_check"] == analysed.answers[s["cell_id"]]["answer_check"]
               for s in analysed.report.summaries)
