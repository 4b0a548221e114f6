"""The manifest is built once per run: when the run folder is made (its `started_at` is then,
not when the environments were ready), and updated afterwards; a resume keeps the run's start,
host and decisions, lists the cells it had and those planned now, and adds `resumed`. The
cells run in this interpreter (NumPy's selftest)."""

from __future__ import annotations

import calendar
import json
import time


from tests.hostile.helpers import HOST_PYTHON
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import hostile_matrix, main, records
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


def test_a_resume_keeps_the_runs_start_and_updates_its_manifest(run_copy, tmp_path, capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["started_at"] = "2001-02-03T04:05:06Z"     # the run's start, long ago
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    more = tmp_path / "more.toml"
    more.write_text(hostile_matrix(repeats=3))
    code, out, err = main(capsys, more, "--resume", run_copy, "--only", "sleep_ms=1.0")
    assert code == 0, err
    after = json.loads((run_copy / "manifest.json").read_text())
    assert after["started_at"] == "2001-02-03T04:05:06Z"
    assert after["host"] == manifest["host"] and after["run_id"] == manifest["run_id"]
    # The cell --only left out stays listed (and in the reports); the other has 3 repeats now.
    assert [(c["id"], c["repeats"]) for c in after["cells"]] == \
        [(c["id"], r) for c, r in zip(manifest["cells"], (3, 2), strict=True)]
    assert "sleep_ms=2.0" in (run_copy / "report.md").read_text()
    assert len(records(run_copy)) == 5
    assert len(after["resumed"]) == 1 and after["resumed"][0]["executor"] == "local"
    assert after["finished_at"] >= after["resumed"][0]["at"] and after["interrupted"] is False
    assert after["environments"]["host"]["env_source"] == "existing"   # prepared, updated
    code, out, err = main(capsys, "history", "list", "--db",
                          f"sqlite:///{run_copy.parent.parent / 'history.sqlite'}")
    assert "2001-02-03" in out


def test_a_new_runs_manifest_is_not_rebuilt_after_preparing(tmp_path, capsys, monkeypatch):
    """Its started_at is when the run folder was made, not when the environments were ready."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then sleep 4; fi\nexec {HOST_PYTHON} "$@"\n')
    slow.chmod(0o755)
    (tmp_path / "m.toml").write_text(hostile_matrix(python=str(slow), repeats=1))
    code, out, err = main(capsys, tmp_path / "m.toml", "--results-dir", tmp_path / "r")
    assert code == 0, out + err
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    started = json.loads((run / "manifest.json").read_text())["started_at"]
    made = calendar.timegm(time.strptime(run.name[:16], "%Y%m%dT%H%M%SZ"))
    started_s = calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ"))
    assert made <= started_s <= made + 2, (started, run.name)     # not 4 s later
