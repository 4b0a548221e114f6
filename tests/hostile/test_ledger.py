"""The run's ledger: one ledger object per run folder for every writer (cells, calibration,
profiles), no warning on a clean run, a restore that keeps every line the run wrote, the
calibration verified like the cells, and a ledger that is deleted, too large or doubled named as
such (in report.md too) rather than read as a run made before the ledger; records a workload
rewrites during the run named and left out by every reader and measured again by a resume, and
a run made before the ledger read unverified, and said so. The cells run in this interpreter
(NumPy's selftest, a tiny calibration), so nothing is built."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import tomli_w

from runner import cli
from runner.results.data import profiles
from runner.results.data.ledger import LEDGER, Ledger, declaration, digest
from runner.results.data.store import Store
from tests.hostile.helpers import HOST_PYTHON, copy_run
from tests.hostile.test_hostile_runs import hostile_matrix, main, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401

MATRIX = hostile_matrix(1.0, calibrate=True, profile="smoke",
                        tables={"profiles": {"smoke": {"size": "tiny", "repeats": 2}}})


def lines_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / LEDGER).read_text().splitlines()]


@pytest.fixture(scope="module")
def calibrated_run(tmp_path_factory) -> tuple[Path, str]:
    """A real run with a calibration: (its folder, what it wrote on stderr)."""
    folder = tmp_path_factory.mktemp("calibrated")
    (folder / "matrix.toml").write_text(MATRIX)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main([str(folder / "matrix.toml"), "--results-dir", str(folder / "results")])
    assert code == 0, out.getvalue() + err.getvalue()
    (run,) = (folder / "results" / "hostile").iterdir()
    return run, err.getvalue()


@pytest.fixture
def run_copy(calibrated_run, tmp_path) -> Path:
    target = tmp_path / "results" / "hostile" / calibrated_run[0].name
    shutil.copytree(calibrated_run[0], target, symlinks=True)
    (target / ".lock").unlink(missing_ok=True)
    (tmp_path / "matrix.toml").write_text(MATRIX)
    return target


def test_a_clean_run_with_a_calibration_warns_of_nothing_and_keeps_every_line(calibrated_run):
    run, err = calibrated_run
    assert "ledger" not in err and "warning" not in err, err
    written = sorted([*(run / "cells").glob("*.json"), *(run / "calibration").glob("*.json")])
    assert len(list((run / "calibration").glob("*.json"))) == 1
    noted = {line["record"]: line["sha256"] for line in lines_of(run)}
    assert noted == {f"{p.parent.name}/{p.name}": digest(p.read_bytes()) for p in written}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["ledger"] == {"file": LEDGER, "covers": ["cells", "calibration", "profiles"]}
    assert "Records unverified" not in (run / "report.md").read_text()


def test_the_runs_writers_share_one_ledger_and_a_restore_drops_no_line(tmp_path):
    store = Store.create("held", tmp_path)
    try:
        record = {"schema": 1}
        store.write_record("a-r1", record)                          # type: ignore[arg-type]
        store.calibration().write_record("b-r1", record)            # type: ignore[arg-type]
        assert store.ledger.restore() is False                      # nothing changed it
        kept = (store.root / LEDGER).read_text()
        (store.root / LEDGER).write_text("")                        # a workload empties it
        assert store.ledger.restore() is True and (store.root / LEDGER).read_text() == kept
        assert [line["record"] for line in lines_of(store.root)] == ["cells/a-r1.json",
                                                                     "calibration/b-r1.json"]
    finally:
        store.close()


def test_a_changed_calibration_record_is_named_and_measured_again(run_copy, tmp_path, capsys):
    (calibration,) = (run_copy / "calibration").glob("*.json")
    record = json.loads(calibration.read_text())
    record["achieved_tflops"] = 1000.0
    calibration.write_text(json.dumps(record))
    why = "changed since the runner wrote it (its sha256 is not the one ledger.jsonl holds)"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and f"warning: {calibration}: {why}; not in the reports" in err, err
    assert f"`calibration/{calibration.name}`: {why}" in (run_copy / "report.md").read_text()
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, out + err
    assert f"set aside {calibration.name} ({why})" in " ".join(out.split())
    assert json.loads(calibration.read_text())["achieved_tflops"] != 1000.0   # measured again
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err == "", err


def test_a_deleted_ledger_is_named_deleted_in_report_md_and_a_resume_refuses(
        run_copy, tmp_path, capsys):
    (run_copy / LEDGER).unlink()
    fault = "deleted (manifest.json says the run keeps one)"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err.strip() == f"warning: {run_copy / LEDGER}: {fault}; the run's " \
                                        "records are read unverified", err
    report = (run_copy / "report.md").read_text()
    assert f"## Records unverified\n\n`ledger.jsonl`: {fault}: this report's records are " \
           "read unverified" in report
    before = sorted(p.name for p in (run_copy / "cells").iterdir())
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 2 and err.strip() == (
        f"error: {run_copy / LEDGER}: {fault}, so the run's records cannot be verified; "
        "nothing more is written into the run (`report` still reads it, unverified): start "
        "a new run"), err
    assert sorted(p.name for p in (run_copy / "cells").iterdir()) == before
    assert not (run_copy / "set-aside").exists() and not (run_copy / LEDGER).exists()


def test_a_ledger_too_large_is_named_unreadable_and_a_resume_sets_nothing_aside(
        run_copy, tmp_path, capsys):
    with (run_copy / LEDGER).open("r+b") as ledger:          # sparse: 65 MB of nothing read
        ledger.truncate(65 << 20)
    fault = "unreadable (larger than 64 MB)"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err.strip() == f"warning: {run_copy / LEDGER}: {fault}; the run's " \
                                        "records are read unverified", err
    assert f"`ledger.jsonl`: {fault}" in (run_copy / "report.md").read_text()
    assert "## Records left out" not in (run_copy / "report.md").read_text()
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 2 and err.startswith(f"error: {run_copy / LEDGER}: {fault}, so the run's "
                                        "records cannot be verified;"), err
    assert not (run_copy / "set-aside").exists()


def test_a_second_line_for_a_record_never_set_aside_is_refused(run_copy, tmp_path, capsys):
    path = sorted((run_copy / "cells").glob("*.json"))[0]
    record = json.loads(path.read_text())
    record["samples_ms"] = [s / 2 for s in record["samples_ms"]]
    path.write_text(json.dumps(record))
    with (run_copy / LEDGER).open("a") as ledger:            # its new digest, appended
        ledger.write(json.dumps({"record": f"cells/{path.name}",
                                 "sha256": digest(path.read_bytes())}) + "\n")
    why = "ledger.jsonl holds a second digest of it, the first never set aside"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and f"warning: {path}: {why}; not in the reports" in err, err
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0 and f"set aside {path.name} ({why})" in " ".join(out.split()), out + err
    retired = [line for line in lines_of(run_copy) if line.get("retired")]
    assert retired == [{"record": f"cells/{path.name}",
                        "retired": f"set aside to set-aside/{path.name}"}]
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err == "", err


def test_a_run_made_before_the_manifest_named_its_ledger_is_read_as_one(run_copy, capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    del manifest["ledger"]
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    (run_copy / LEDGER).write_text("".join(line + "\n" for line in (
        run_copy / LEDGER).read_text().splitlines() if "calibration/" not in line))
    code, out, err = main(capsys, "report", run_copy)         # its ledger vouched for cells/
    assert code == 0 and err == "", err
    (run_copy / LEDGER).unlink()
    code, out, err = main(capsys, "report", run_copy)
    assert err.strip() == f"warning: {run_copy / LEDGER}: missing (a run made before the " \
                          "ledger); the run's records are read unverified", err


def test_profiles_are_noted_in_the_runs_ledger_and_verified_on_read(tmp_path):
    store = Store.create("profiled", tmp_path)
    store.write_manifest({"schema": 1, "name": "profiled", "ledger": declaration()})
    try:
        profile = {"cell_id": "c1", "cell_name": "x", "environment": "host", "row": "r",
                   "workload": "selftest", "task": "run", "batch_size": 1, "status": "failed"}
        profiles.write_profile(store.root, "c1", profile, None, None, store.ledger)
        profile["status"] = "ok"                                    # made again: no refusal
        profiles.write_profile(store.root, "c1", profile, {"rows": []}, b"\x1f\x8b", store.ledger)
        assert store.ledger.restore() is False
        reader = Ledger(store.root)
        (found,), problems = profiles.read_profiles(store.root, reader)
        assert found["status"] == "ok" and problems == []
        path = store.root / "profiles" / "c1" / "profile.json"
        path.write_text(json.dumps({**profile, "step_ms": 0.001}))
        found, problems = profiles.read_profiles(store.root, Ledger(store.root))
        assert found == [] and problems == [
            f"{path}: changed since the runner wrote it (its sha256 is not the one "
            "ledger.jsonl holds)"]
        assert not profiles.has_profile(store.root, "c1", Ledger(store.root))
    finally:
        store.close()


# --- records a workload rewrites, and a run made before the ledger ---------------------------

REWRITER = '''
import json, pathlib, time

DONE = []


def numpy_run(spec):
    """Each step sleeps 1 ms; the first step of each process, while the trigger file exists,
    halves the step times of every record the run has finished and empties its ledger."""
    trigger = pathlib.Path(spec.options["trigger"])
    spec.options["n"]

    def step():
        if trigger.exists() and not DONE:
            DONE.append(True)
            run = next(p for p in pathlib.Path(__file__).resolve().parents
                       if (p / "manifest.json").is_file())
            for path in (run / "cells").glob("*.json"):
                record = json.loads(path.read_text())
                record["samples_ms"] = [s / 2 for s in record["samples_ms"]]
                path.write_text(json.dumps(record))
            (run / "ledger.jsonl").write_text("")
        time.sleep(0.001)
        return 1.0
    return step
'''


def test_records_a_workload_rewrites_are_named_and_left_out_everywhere(tmp_path, capsys):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "rewriter.py").write_text(REWRITER)
    trigger = tmp_path / "trigger"
    trigger.touch()
    matrix = tmp_path / "m.toml"
    matrix.write_text(tomli_w.dumps({
        "run": {"name": "hostile", "repeats": 2, "warmup_steps": 1, "steps": 3,
                "profile": "full"},
        "environments": {"host": {"python": HOST_PYTHON, "api": "numpy"}},
        "workloads": {"rewriter": {"file": "bench/rewriter.py", "tasks": ["run"],
                                   "options": {"trigger": str(trigger), "n": 1}}},
        "benchmarks": [{"workload": "rewriter", "environments": ["host"],
                        "options": {"n": [1, 2]}}]}))
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    files = sorted((run / "cells").glob("*.json"))
    last = max(files, key=lambda p: p.stat().st_mtime_ns)   # no worker ran after its own
    changed = [p for p in files if p != last]
    assert len(files) == 4 and code == 0, out + err
    why = "changed since the runner wrote it (its sha256 is not the one ledger.jsonl holds)"
    assert f"warning: {run / 'ledger.jsonl'}: changed while the run ran; written again from " \
           "the runner's own copy" in err
    for path in changed:                 # the run's own reports: its copy of the ledger held
        assert f"warning: {path}: {why}; not in the reports" in err
    report = (run / "report.md").read_text()
    assert "## Records left out" in report and all(f"`cells/{p.name}`: {why}" in report
                                                   for p in changed)
    code, out, err = main(capsys, "report", run)
    assert code == 0 and all(f"warning: {p}: {why}; not in the reports" in err for p in changed)
    code, out, err = main(capsys, "compare", run, run, "--markdown", tmp_path / "c.md")
    assert all(f"warning: {p}: {why}; not compared" in err for p in changed), err
    code, out, err = main(capsys, "history", "import", run, "--db",
                          f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert code == 0 and all(f"warning: {p}: {why}; not recorded" in err for p in changed)
    with sqlite3.connect(tmp_path / "h.sqlite") as connection:
        assert connection.execute("SELECT count(*) FROM repeats").fetchone()[0] == 1
    trigger.unlink()
    code, out, err = main(capsys, matrix, "--resume", run)
    assert code == 0, out + err
    said = " ".join(out.split())
    assert all(f"set aside {p.name} ({why}) to {run / 'set-aside'}: its cell runs again" in said
               for p in changed)
    assert len(records(run)) == 4 and len(list((run / "set-aside").iterdir())) == 3
    code, out, err = main(capsys, "report", run)
    assert code == 0 and err == "", err


def test_a_run_without_a_ledger_is_read_unverified_and_said_so(finished_run, tmp_path, capsys):
    run_copy = copy_run(finished_run, tmp_path)       # the shared run: no calibration
    (run_copy / "ledger.jsonl").unlink()          # a run made before the ledger (and before
    manifest = json.loads((run_copy / "manifest.json").read_text())     # its manifest said so)
    del manifest["ledger"]
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    missing = f"warning: {run_copy / 'ledger.jsonl'}: missing (a run made before the ledger); " \
              "the run's records are read unverified"
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err.strip() == missing
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, out + err
    assert "ledger.jsonl: the run had none; its 4 record(s) are taken as they are now" in \
        " ".join(out.split())
    assert len(records(run_copy)) == 4 and not (run_copy / "set-aside").exists()
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and err == ""
