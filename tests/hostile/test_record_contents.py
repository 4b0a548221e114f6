"""What a record may hold, as the runner reads it back: every number the statistics compute
with is bounded — a huge but finite one is set aside by `report`, `compare`, `--resume` and
`history import` (one warning line), a worker that reports one is a crashed cell, and
whatever number a field holds `report` ends 0 with its tables (hypothesis draws them); a record
of a cell the manifest does not list is named and left out; a worker's `not_applicable` for a
cell the plan runs is a failed cell. The cells run in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from tests.hostile.helpers import FUZZ, copy_run, fake_interpreter, tamper
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import hostile_matrix, main, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


def test_huge_finite_samples_are_set_aside_by_report_compare_resume_and_history(
        run_copy, finished_run, tmp_path, capsys):
    huge = tamper(run_copy, lambda r: r.update(samples_ms=[1.7e308, 1.7e308, 1.7e308]))
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0, err
    for path in huge:
        assert f"warning: {path}: samples_ms[0]: must be <= 604800000.0, got 1.7e+308; not in " \
               "the reports" in err
    assert (run_copy / "report.md").is_file()
    code, out, err = main(capsys, "compare", finished_run, run_copy, "--markdown",
                          tmp_path / "c.md")
    assert code in (0, 1) and "internal error" not in err and (tmp_path / "c.md").is_file()
    code, out, err = main(capsys, "history", "import", run_copy, "--db",
                          f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert code == 0, err
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err
    for path in huge:
        assert f"set aside {path.name} (samples_ms[0]: must be <= 604800000.0" in \
            " ".join(out.split())
    assert all(r["status"] == "ok" and max(r["samples_ms"]) < 1e3
               for r in records(run_copy).values())


HUGE_WORKER = """
import json, sys
spec = json.load(open(sys.argv[1]))
json.dump({"schema": 1, "status": "ok", "samples_ms": [1.7e308] * 3, "flops_per_step": 1e308},
          open(sys.argv[2], "w"))
"""


def test_a_worker_giving_huge_step_times_is_a_crashed_cell_not_an_internal_error(tmp_path,
                                                                                  capsys):
    liar = fake_interpreter(tmp_path, HUGE_WORKER)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(liar), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1 and "internal error" not in err, out + err      # failed cells, reports
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert all(r["status"] == "crashed" and "samples_ms[0]: must be <= 604800000.0" in r["error"]
               for r in records(run).values())
    assert (run / "report.md").is_file()


# Every number the statistics read: the record's figures, the samples and warm-up times, the
# counts that scale them, the outliers' indices and extra's windows.
NUMBER_FIELDS = ["samples_ms", "warmup_s", "steps_per_call", "calls_per_sample", "outliers",
                 "extra.telemetry_window_s", "extra.epoch_s", "import_s", "setup_s",
                 "compile_s", "train_s", "wall_s", "items_per_step", "rss_initial_mb",
                 "rss_peak_mb", "vram_peak_mb", "nvml_memory_peak_mb", "gpu_power_mean_w",
                 "gpu_energy_j", "cpu_util_mean", "flops_per_step", "loss_first", "loss_last",
                 "accuracy"]


HOSTILE_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7e308, -1.7e308, 5e-324, 1e-300, 0.0, -0.0, 1e30, 1e31]),
    st.integers(min_value=-10**400, max_value=10**400))


def set_field(record: dict, field: str, value) -> None:
    if field.startswith("extra."):
        record["extra"] = {**(record.get("extra") or {}), field[6:]: value}
    elif field in ("samples_ms", "warmup_s"):
        record[field] = [value] * 3
    elif field == "outliers":
        record[field] = [[value, value]]
    else:
        record[field] = value
    if field == "gpu_energy_j" or field == "extra.telemetry_window_s":
        record["train_s"] = 2.0           # an energy window the reports compute with


@settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 2))     # a `report` per example
@given(field=st.sampled_from(NUMBER_FIELDS), value=HOSTILE_NUMBERS)
def test_any_number_in_a_record_is_reported_or_set_aside(finished_run, capsys, field, value):
    """Whatever finite (or huge whole) number a field holds, `report` ends 0 with its tables:
    the record is in them, or set aside with one warning line naming it."""
    with tempfile.TemporaryDirectory() as scratch:
        run = copy_run(finished_run, Path(scratch))
        changed = tamper(run, lambda r: set_field(r, field, value))
        (run / "report.md").unlink()
        code, out, err = main(capsys, "report", run)
        assert code == 0, err
        assert all(line.startswith("warning: ") for line in err.strip().splitlines()), err
        assert "internal error" not in err and "Traceback" not in err
        assert (run / "report.md").is_file()
        named = [p for p in changed if str(p) in err]
        assert named in ([], changed), err


def test_a_record_of_a_cell_the_manifest_does_not_list_is_named_and_left_out(run_copy, tmp_path,
                                                                             capsys):
    source = sorted((run_copy / "cells").glob("*.json"))[0]
    record = json.loads(source.read_text())
    record.update(cell_id="0123456789", options={**record["options"], "sleep_ms": 99.0},
                  cell_name=record["cell_name"].replace("sleep_ms=1.0", "sleep_ms=99.0"))
    extra = run_copy / "cells" / "0123456789-r1.json"
    extra.write_text(json.dumps(record))
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0
    assert f"warning: {extra}: cell '0123456789' is not a cell of this run (manifest.json " \
           "does not list it); not in the reports" in err
    assert "99.0" not in (run_copy / "report.md").read_text()
    assert "0123456789" not in (run_copy / "summary.csv").read_text()
    code, out, err = main(capsys, "compare", run_copy, run_copy, "--markdown", tmp_path / "c.md")
    assert f"{extra}: cell '0123456789' is not a cell of this run" in err


NA_WORKER = """
import json, sys
json.dump({"schema": 1, "status": "not_applicable", "error": "not today"}, open(sys.argv[2], "w"))
"""


def test_a_worker_claiming_not_applicable_for_a_planned_cell_is_failed(tmp_path, capsys):
    liar = fake_interpreter(tmp_path, NA_WORKER)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(liar), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 1, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    for record in records(run).values():
        assert record["status"] == "failed"
        assert "the worker said not_applicable, but the plan runs this cell" in record["error"]
        assert "not today" in record["error"]
