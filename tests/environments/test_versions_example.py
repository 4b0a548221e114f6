"""examples/versions.toml end to end: NumPy 1.26 (a derived stack) beside NumPy as shipped, in one
run; the report names the version change as the environment effect, `compare` and `history diff`
of the two stacks show it, `bisect` between them resolves and measures both ends, and `reproduce`
rebuilds the derived stack from the run folder's own lock with the resolver's cache gone."""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import select

from runner import cli
from runner.environments import installed, stacks, venvs
from runner.history import db, tables
from runner.paths import IMAGES_DIR, REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "versions.toml"


def records_of(run) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "cells").glob("*.json"))]


@pytest.mark.slow
def test_two_numpy_versions_side_by_side(pypi, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    monkeypatch.setenv("DL_BENCH_HISTORY_URL", url)
    cache = tmp_path / "stack-cache"
    monkeypatch.setattr(stacks, "CACHE_ROOT", cache)
    results = tmp_path / "results"
    shipped = installed.lock_pins(IMAGES_DIR / "numpy" / "requirements.lock")["numpy"]

    code = cli.main([str(EXAMPLE), "--results-dir", str(results), "--profile", "smoke",
                     "--only", "elementwise"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "derived: images/numpy + numpy==1.26.4 → lock sha" in out
    assert f"(numpy-1-26, cpu: numpy {shipped} → 1.26.4)" in out
    [run] = (results / "versions").iterdir()

    # The stack the run used is kept in its folder; its records name its hash and NumPy 1.26.
    lock = run / "stacks" / "numpy-1-26" / "requirements.lock"
    old = [r for r in records_of(run) if r["environment"] == "numpy-1-26"]
    assert old and {r["metadata"]["lock_sha256"] for r in old} == {venvs.sha256_file(lock)}
    assert {r["distributions"]["numpy"] for r in old} == {"1.26.4"}
    entry = json.loads((run / "manifest.json").read_text())["environments"]["numpy-1-26"]
    assert entry["stack"]["moved"] == [f"numpy {shipped} → 1.26.4"]
    assert entry["pins"] == ["numpy==1.26.4"]

    # The report's environment effect is named by the version change.
    report = (run / "report.md").read_text()
    assert "### Environments against numpy-1-26" in report
    assert f"- numpy: numpy 1.26.4 → {shipped}" in report
    assert f"- numpy (numpy 1.26.4 → {shipped}) against numpy-1-26: " in report

    # compare and the history's stack diff, the two stacks of the one run.
    markdown = tmp_path / "compare.md"
    code = cli.main(["compare", str(run), str(run), "--environments", "numpy-1-26", "numpy",
                     "--markdown", str(markdown)])
    capsys.readouterr()
    compared = markdown.read_text()
    assert code in (0, 1) and f"distributions numpy 1.26.4 → {shipped}" in compared
    [row] = [ln for ln in compared.splitlines() if ln.startswith("| elementwise (run)")]
    assert "| numpy-1-26 → numpy | **differs** |" in row and "metadata differ" not in row
    assert cli.main(["history", "diff", str(run), str(run), "--environments", "numpy-1-26",
                     "numpy"]) == 0
    assert f"↑ numpy 1.26.4 → {shipped}" in capsys.readouterr().out

    # bisect between them: both ends resolved, built and measured.
    names = {r["environment"]: r["cell_name"] for r in records_of(run)}
    code = cli.main(["bisect", str(run), str(run), "--cell", names["numpy"], "--good-cell",
                     names["numpy-1-26"], "--repeats", "2", "--work-dir", str(tmp_path / "b")])
    out, err = capsys.readouterr()
    assert code in (0, 1), out + err
    assert f"1 distributions changed: numpy 1.26.4 → {shipped}" in out
    engine = db.open_history(url)
    with engine.connect() as conn:
        steps = conn.execute(select(tables.bisect_steps).order_by(tables.bisect_steps.c.step)).all()
    engine.dispose()
    assert [s.taken for s in steps] == [[], ["numpy"]]
    assert all(s.resolved and len(s.lock_sha256) == 64 for s in steps)
    assert all(len(s.repeat_medians_ms) == 2 for s in steps)

    # reproduce: the derived stack from the run folder's lock, never resolved again.
    shutil.rmtree(cache)
    assert cli.main(["reproduce", str(run), "--results-dir", str(results)]) == 0
    capsys.readouterr()
    assert not cache.exists()
    [again] = [p for p in (results / "versions").iterdir() if p != run]
    assert {r["metadata"]["lock_sha256"] for r in records_of(again)
            if r["environment"] == "numpy-1-26"} == {venvs.sha256_file(lock)}
    assert (again / "stacks" / "numpy-1-26" / "requirements.lock").read_bytes() == \
        lock.read_bytes()
