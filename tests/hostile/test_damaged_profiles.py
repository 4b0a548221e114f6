"""Damaged profiles: a profile.json or kernels.json that is not a valid profile (no cell_name, a
row that is a table, a batch size that is text) or holds a figure that is not one (NaN, 1e308, a
negative time) is named and left out by `report` and `profile diff`, as a record is — never
exit 70, never shown. The damaged files are written with their digests in the run's ledger (as a
runner that wrote them would have), so it is their content that is judged. The cells run in this
interpreter (NumPy's selftest, profiled by cProfile)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results.data.ledger import Ledger
from tests.hostile.test_hostile_runs import main, no_process_left_behind  # noqa: F401


@pytest.fixture(scope="module")
def profiled_run(finished_run, tmp_path_factory) -> Path:
    """The finished run (2 selftest cells) with both cells profiled by `profile RUN`."""
    run = tmp_path_factory.mktemp("profiled") / "results" / "hostile" / finished_run.name
    shutil.copytree(finished_run, run, symlinks=True)
    (run / ".lock").unlink(missing_ok=True)
    assert cli.main(["profile", str(run)]) == 0
    assert len(list((run / "profiles").glob("*/profile.json"))) == 2
    return run


def rewrite(run: Path, path: Path, text: str) -> None:
    """The file's new text, and its digest in the ledger as the runner would note it."""
    path.write_text(text)
    ledger, name = Ledger(run), str(path.relative_to(run))
    ledger.note(name, path.read_bytes(), replacing="rewritten by the test")


def damage(run: Path, name: str, change) -> Path:
    path = sorted((run / "profiles").iterdir())[0] / name
    document = json.loads(path.read_text())
    change(document)
    rewrite(run, path, json.dumps(document).replace('"NAN"', "NaN"))
    return path.parent / "profile.json"


CASES = {
    "no cell_name": ("profile.json", lambda p: p.pop("cell_name"),
                     "cell_name: missing"),
    "a row that is a table": ("profile.json", lambda p: p.update(row={"a": 1}),
                              "row: expected a string"),
    "a batch size that is text": ("profile.json", lambda p: p.update(batch_size="abc"),
                                  "batch_size: expected a whole number, got str 'abc'"),
    "a NaN step time": ("profile.json", lambda p: p.update(profiled_step_ms="NAN"),
                        "profiled_step_ms: must be a finite number, got nan"),
    "an absurd step time": ("profile.json", lambda p: p.update(profiled_step_ms=1e308),
                            "profiled_step_ms: must be <= 604800000.0, got 1e+308"),
    "a negative time": ("profile.json", lambda p: p.update(timed_median_ms=-3.0),
                        "timed_median_ms: must be >= 0.0, got -3.0"),
    "an absurd op time": ("kernels.json", lambda k: k["rows"][0].update(us_per_step=1e308),
                          "kernels.json: rows[0].us_per_step: 1e+308 is not a figure from 0 "
                          "to 1e+30"),
    "a NaN busy time": ("kernels.json", lambda k: k.update(device_busy_us="NAN"),
                        "kernels.json: device_busy_us: nan is not a figure from 0 to 1e+30"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_profile_is_named_and_left_out(case, profiled_run, tmp_path, capsys):
    run = tmp_path / "results" / "hostile" / profiled_run.name
    shutil.copytree(profiled_run, run, symlinks=True)
    name, change, said = CASES[case]
    path = damage(run, name, change)
    code, out, err = main(capsys, "report", run)
    assert code == 0, err
    warnings = err.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {path}: ") and \
        said in warnings[0] and warnings[0].endswith("; not in the reports"), err
    report = (run / "report.md").read_text()
    assert report.count("profiles/") and path.parent.name not in report.split(
        "## Where the time goes")[-1].split("## Plots")[0], report
    code, out, err = main(capsys, "profile", "diff", run, profiled_run)
    assert code == 0 and err.strip().startswith(f"warning: {path}: "), err
    assert err.strip().endswith("; not compared") and said in err
