"""report.md's Scaling section and its plot (render/markdown_scaling.py, plots_scaling.py), from a
recorded data-parallel run (tests/results/synthetic.py scaling_records, written as a run folder
and reported by `python -m runner report`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import cli
from runner.worker.protocol import SCHEMA_VERSION
from tests.fixtures import FIXTURE_RUNS
from tests.results.synthetic import scaling_records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, str]:
    run = tmp_path_factory.mktemp("runs") / "scaling"
    (run / "cells").mkdir(parents=True)
    manifest = json.loads((FIXTURE_RUNS / "base" / "manifest.json").read_text())
    records = scaling_records()
    for record in records:
        record.update(schema=SCHEMA_VERSION, run_id="fixture/scaling")
        (run / "cells" / f"{record['cell_id']}-r{record['repeat']}.json").write_text(
            json.dumps(record))
    manifest["cells"] = [{"id": r["cell_id"], "name": r["cell_name"],
                          "environment": r["environment"], "repeats": 3,
                          "not_applicable": r.get("error")}
                         for r in records if r["repeat"] == 1]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert cli.main(["report", str(run)]) == 0
    text = (run / "report.md").read_text(encoding="utf-8")
    return run, text[text.index("## Scaling"):text.index("\n## ", text.index("## Scaling") + 3)]


def test_the_section_tabulates_items_per_s_and_efficiency_per_environment(report):
    _, section = report
    assert "### cnn (fit) [scaling=strong], batch 128\n" in section
    assert "| Environment | Data-parallel strategy (all-reduce) | 1 device | 2 devices | " \
           "4 devices | 8 devices |" in section
    assert "| keras-jax | keras.distribution.DataParallel (XLA collectives (NCCL)) | 1,280 | " \
           "2,304 | 4,096 |  |" in section
    assert "| torch | torch.nn.parallel.DistributedDataParallel (nccl) | 1,600 | 3,040 | " \
           "6,080 | NA |" in section
    assert "| keras-jax | 0.90 (95 % CI " in section
    line = next(li for li in section.splitlines() if li.startswith("| torch | 0.95"))
    assert line.count("✓") == 1 and line.count("≠") == 1 and line.endswith("| NA |")


def test_the_section_says_why_an_answer_differs_and_has_its_plot_and_finding(report):
    run, section = report
    assert "- torch at 4 devices: different: first_step_loss: 4.60 against 2.30" in section
    assert "![Scaling: cnn (fit) [scaling=strong], batch 128](plots/scaling-1.png)" in section
    assert (run / "plots" / "scaling-1.png").read_bytes()[:8] == PNG_MAGIC
    assert "Finding: cnn (fit) [scaling=strong], batch 128: of linear scaling, keras-jax 0.80 " \
           "(95 % CI" in section
    report_md = (run / "report.md").read_text(encoding="utf-8")
    assert report_md.count("plots/scaling-1.png") == 1               # not listed twice


def test_the_effects_treat_devices_as_an_axis_of_time_per_item(report):
    run, _ = report
    text = (run / "report.md").read_text(encoding="utf-8")
    assert "devices: against devices = 1 (time per item)" in text
    assert not list(run.glob("plots/scaling-*.png"))[1:]             # one row, one plot
