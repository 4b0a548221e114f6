"""The history against SQLite and a real PostgreSQL server, the same bodies for both: schema
migrations, import of the recorded fixture runs, list / show / diff / regressions, and a run
writing itself into the history at its end."""

from __future__ import annotations

import sys

import pytest
from sqlalchemy import inspect

from runner.history import db, tables

from tests.fixtures import FIXTURE_RUNS
from tests.matrices import matrix_text, this_interpreter
from .runs import insert_rows, old_run, write_run


def test_migrations_create_from_empty_and_upgrade_keeping_rows(history_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = db.engine_for(history_url)
    db.upgrade(engine, "0001")
    assert db.current_revision(engine) == "0001"
    assert {"runs", "cells", "repeats", "environments", "distributions"} <= set(
        inspect(engine).get_table_names())
    assert "bisects" not in inspect(engine).get_table_names()
    insert_rows(engine, runs=[old_run(1, "fixture/base")])      # as 0001 knows a run
    db.upgrade(engine)                                    # 0001 → head, rows kept
    assert db.current_revision(engine) == "0003"
    assert "bisect_steps" in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.execute(tables.runs.select()).first().run_id == "fixture/base"
        # The migrations build exactly the schema runner/history/tables.py defines.
        assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
    db.upgrade(engine)                                    # idempotent
    engine.dispose()


def test_import_is_idempotent_and_list_filters(history):
    code, out, _ = history("import", FIXTURE_RUNS)
    assert code == 0
    assert "4 added, 0 updated, 0 unchanged" in out
    assert "added     fixture/base (8 cells)" in out
    code, out, _ = history("import", FIXTURE_RUNS / "base", FIXTURE_RUNS)
    assert "0 added, 0 updated, 5 unchanged" in out
    code, out, _ = history("list")
    assert code == 0 and "4 runs" in out
    for run in ("fixture/base", "fixture/driver", "fixture/same", "fixture/slower"):
        assert run in out
    assert "6/8" in out                                   # one failed, one not applicable
    assert "550.54.15" in out and "560.35.03" in out       # drivers, read from the records
    code, out, _ = history("list", "--gpu", "*A100*", "--since", "2026-11-22",
                           "--until", "2026-11-22")
    assert "4 runs" in out
    code, out, _ = history("list", "--host", "nowhere*")
    assert "0 runs" in out


def test_a_changed_run_folder_replaces_its_rows(history, tmp_path):
    folder = write_run(tmp_path, "changing", 1, level=1.0)
    history("import", folder)
    write_run(tmp_path, "changing", 1, level=2.0)          # resumed, say: new records
    code, out, _ = history("import", folder)
    assert "updated   changing/" in out and "0 added, 1 updated" in out
    code, out, _ = history("show", "cnn-fit-keras-jax-b128")
    assert "110.1" in out and "55.04" not in out           # only the new figures


def test_show_gives_the_series_with_stack_changes(history):
    history("import", FIXTURE_RUNS)
    code, out, _ = history("show", "f2cnnkrjax")           # by cell id
    assert code == 0
    assert "cnn-fit-keras-jax-b128: cnn (fit), batch 128" in out
    lines = [line for line in out.splitlines() if "fixture/" in line]
    assert [line.split()[1] for line in lines] == ["fixture/base", "fixture/driver",
                                                   "fixture/same", "fixture/slower"]
    # The run's estimator, the geometric mean of the repeat medians (issue 59 item 11)
    assert "55.04" in lines[0] and "54.85–55.24" in lines[0] and "first" in lines[0]
    assert "driver_version 550.54.15 → 560.35.03" in lines[1]
    assert "66.05" in lines[3] and "same stack" in lines[3]
    code, _, err = history("show", "no-such-cell")
    assert code == 2 and err.count("\n") == 1 and "no cell of that name" in err
    code, _, err = history("show", "cnn-fit-*")
    assert code == 2 and "names 3 cells" in err


def test_diff_names_added_removed_upgraded_distributions_and_the_driver(history, tmp_path):
    a = write_run(tmp_path, "stack", 1, distributions={"numpy": "1.26.4", "tomli": "2.2.1",
                                                       "jax": "0.10.2"})
    b = write_run(tmp_path, "stack", 2, distributions={"numpy": "2.4.6", "six": "1.17.0",
                                                       "jax": "0.10.1"}, driver="560.35.03")
    history("import", a, b)
    code, out, _ = history("diff", "stack/20260102T000000Z", str(b))   # run id, or folder
    assert code == 0
    assert "run: driver_version 550.54.15 → 560.35.03" in out
    for line in ("driver_version 550.54.15 → 560.35.03", "+ six 1.17.0", "- tomli 2.2.1",
                 "↑ numpy 1.26.4 → 2.4.6", "↓ jax 0.10.2 → 0.10.1"):
        assert line in out
    code, _, err = history("diff", "stack/nope", str(b))
    assert code == 2 and "no such run in the history" in err


def test_regressions_finds_a_step_at_its_run_and_gates(history, tmp_path):
    # Eight runs at one level, then four 25 % slower (each repeat with 2 % noise).
    for i in range(12):
        history("import", write_run(tmp_path, "nightly", i, level=1.25 if i >= 8 else 1.0,
                                    noise=0.02, seed=i))
    code, out, _ = history("regressions", "--cell", "cnn-fit-keras-jax-b128")
    assert code == 1
    row = next(line for line in out.splitlines() if "cnn-fit-keras-jax-b128" in line)
    assert "nightly/20260109T000000Z" in row                # the ninth run starts the new level
    assert "slower" in row and "yes" in row
    ratio = float(row.split("slower")[0].split()[-2].split("(")[0]) if "(" in row else None
    assert "1.2" in row, row
    assert "1 new slowdowns" in out
    code, out, _ = history("regressions", "--cell", "cnn-fit-keras-jax-b128", "--recent", "3")
    assert code == 0 and "0 new slowdowns" in out        # older than the newest 3 runs
    del ratio


def test_regressions_is_quiet_on_a_flat_noisy_series(history, tmp_path):
    for i in range(12):
        history("import", write_run(tmp_path, "flat", i, noise=0.03, seed=100 + i))
    code, out, _ = history("regressions")
    assert code == 0
    assert "0 change points" in out


def test_a_run_writes_itself_into_the_history(write_matrix, results_dir, capsys, monkeypatch,
                                              history_url):
    from runner import cli

    monkeypatch.delenv("DL_BENCH_HISTORY_URL", raising=False)
    matrix = write_matrix(matrix_text("hist", repeats=2, steps=3,
                                      tables={"history": {"url": history_url}},
                                      environments={"here": this_interpreter()},
                                      benchmarks=[{"workload": "selftest",
                                                   "environments": ["here"]}]),
                          with_environments=False)
    assert cli.main([str(matrix), "--results-dir", str(results_dir)]) == 0
    out = capsys.readouterr().out
    assert "history: added hist/" in out
    engine = db.open_history(history_url)
    with engine.connect() as conn:
        run = conn.execute(tables.runs.select()).first()
        assert run.origin == "run" and run.runner_version
        cells = conn.execute(tables.cells.select()).all()
        assert [c.status for c in cells] == ["ok"]
        reps = conn.execute(tables.repeats.select()).all()
        assert sorted(r.repeat for r in reps) == [1, 2]
        assert all(len(r.record_sha256) == 64 and r.record_path.startswith("cells/")
                   for r in reps)
    engine.dispose()


def test_a_history_that_cannot_be_written_costs_one_warning(write_matrix, results_dir, capsys,
                                                            tmp_path, monkeypatch):
    from runner import cli

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", f"sqlite:///{blocker}/sub/history.sqlite")
    matrix = write_matrix(matrix_text("nohist", steps=3, environments={"here": this_interpreter()},
                                      benchmarks=[{"workload": "selftest",
                                                   "environments": ["here"]}]),
                          with_environments=False)
    assert cli.main([str(matrix), "--results-dir", str(results_dir)]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith(("history:", "! history"))]
    assert len(warnings) == 1 and warnings[0].startswith("! history: not recorded")


@pytest.mark.parametrize("url", ["mysql://x@y/z", "not a url"])
def test_a_bad_history_url_is_one_line_exit_2(url, capsys):
    from runner import cli

    assert cli.main(["history", "list", "--db", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: history URL")


def test_matrix_history_url_must_be_a_database_url(write_matrix):
    from runner.schema import matrix as matrix_mod
    from runner.errors import UsageError

    path = write_matrix('[history]\nurl = "http://example"\n[[benchmarks]]\nworkload = "matmul"\n')
    with pytest.raises(UsageError, match="history.url"):
        matrix_mod.load(path)


def test_postgresql_without_its_driver_is_one_line_naming_the_extra(capsys, monkeypatch):
    # psycopg is the `postgres` extra: a host installed without it gets one line, exit 2.
    from runner import cli

    monkeypatch.setitem(sys.modules, "psycopg", None)       # as if it were not installed
    assert cli.main(["history", "list", "--db", "postgresql://bench@127.0.0.1:1/bench"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dl-bench-runner[postgres]" in err, err


def test_show_gives_a_generate_cells_time_to_first_token(history, tmp_path):
    """The history keeps a generate cell's time to first token and decode latency (its stored
    summary) and `show` prints them beside the median."""
    import json

    folder = write_run(tmp_path, "tokens", 1)
    for path in sorted((folder / "cells").glob("e1ewjax000-r*.json")):
        record = json.loads(path.read_text())
        record["extra"] = {**(record.get("extra") or {}), "prefill_ms": [0.5, 0.25, 0.75],
                           "generated_tokens": 11}
        path.write_text(json.dumps(record))
    history("import", folder)
    code, out, _ = history("show", "e1ewjax000")
    assert code == 0 and "first token ms" in out and "decode ms/token" in out
    line = next(line for line in out.splitlines() if "tokens/" in line)
    assert " 0.5 " in line


def test_three_imports_creating_one_database_at_once_record_every_run(history_url, tmp_path):
    """The hostile suite's race (tests/hostile/test_history_database.py, SQLite) against
    PostgreSQL: three processes, each ready before the word, import a run each into an empty
    database (without its advisory lock: "duplicate key value violates unique constraint")."""
    if history_url.startswith("sqlite"):
        pytest.skip("SQLite's: tests/hostile/test_history_database.py")
    from sqlalchemy import create_engine, text

    from tests.hostile.test_history_database import import_at_once

    import_at_once(tmp_path, [FIXTURE_RUNS / name for name in ("base", "driver", "slower")],
                   history_url)
    engine = create_engine(db._driver_url(history_url))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 3
    engine.dispose()


def test_the_series_and_the_site_use_the_runs_estimator():
    """Issue 59 item 11: the history's series, its change points and its site plotted the median
    of the repeat medians (1.0 for repeats 1, 1, 3) where every report shows their geometric
    mean (1.44)."""
    from runner.history import site
    from runner.history.queries import Point, run_time

    point = Point(1, "r/1", None, "ok", 1.0, 0.9, 3.5, [1.0, 1.0, 3.0], None, "jax", "x", 1)
    assert point.time_ms == pytest.approx(3 ** (1 / 3))
    assert run_time([], 2.0) == 2.0                  # a row without repeat medians: its median
    page = site.index_page([], [{"label": "x", "batch_size": 1, "environment_name": "jax",
                                 "status": "ok", "median_ms": 1.0, "ci_low_ms": 0.9,
                                 "ci_high_ms": 3.5, "repeat_medians_ms": [1.0, 1.0, 3.0]}])
    assert ">1.442<" in page and "<th>ms</th>" in page
