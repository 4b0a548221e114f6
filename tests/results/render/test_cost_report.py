"""Dollars in the results, on the recorded fixture runs with a price written into their
manifests: the Cost section (per 1,000 items with the time's interval, per epoch), its figures
against hand-computed ones, summary.csv's columns, a finding in dollars, compare's and history
show's price line, and the section as Chromium renders report.html."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results.analysis import cost
from tests.fixtures import FIXTURE_RUNS

PRICE = {"usd_per_hour": 29.39, "gpus": 8, "pricing": "on_demand", "source": "price table",
         "instance": "a2-highgpu-8g", "accelerator": "A100", "provider": "gcp",
         "region": "us-central1", "table": "/x/prices.csv", "table_sha256": "0" * 64,
         "retrieved_at": "2026-11-20", "row_source": "test", "alternatives": 1,
         "per_gpu_usd_per_hour": 29.39 / 8, "label": "list-price estimate"}


def priced_run(tmp_path: Path, name: str, price: dict | None = None,
               target: Path | None = None) -> Path:
    """A copy of a fixture run (or `target`, a copy made already) with a price."""
    folder = target or tmp_path / name
    if target is None:
        shutil.copytree(FIXTURE_RUNS / name, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["cost"] = {"price": price or PRICE, "estimate": None, "budget": None,
                        "max_hours": None, "spent_s": 100.0, "spent_usd": 0.8,
                        "sessions": []}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert cli.main(["report", str(folder)]) == 0
    return folder


@pytest.fixture
def base(tmp_path, capsys) -> Path:
    folder = priced_run(tmp_path, "base")
    capsys.readouterr()
    return folder


def summary_rows(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((folder / "summary.csv").read_text(encoding="utf-8")
                               .splitlines()))


def test_the_cost_section_answers_what_each_stack_costs_per_item(base):
    report = (base / "report.md").read_text(encoding="utf-8")
    section = report.split("## Cost", 1)[1].split("\n## ", 1)[0]
    assert "list-price estimates at $29.39/h for gcp a2-highgpu-8g us-central1 (on-demand; " \
           "$3.67/h per GPU; price table prices.csv of 2026-11-20)" in section
    assert "USD per 1,000 items" in section and "| cnn (fit) | 128 |" in section
    row = next(r for r in summary_rows(base) if r["cell_name"] == "cnn-fit-keras-jax-b128")
    per_gpu_s = 29.39 / 8 / 3600
    step_s, items = float(row["geomean_ms"]) / 1000, 128
    assert float(row["usd_per_1k_items"]) == pytest.approx(per_gpu_s * step_s / items * 1000)
    low, high = float(row["usd_per_1k_items_low"]), float(row["usd_per_1k_items_high"])
    assert low < float(row["usd_per_1k_items"]) < high
    # The time's own interval priced alike (issue 59 item 9): before, per_1k × ci_low ÷ the
    # median, an interval moved onto another centre than the one it was made around.
    assert low == pytest.approx(per_gpu_s * float(row["median_ci_low_ms"]) / items)
    assert high == pytest.approx(per_gpu_s * float(row["median_ci_high_ms"]) / items)
    assert "The estimate before the run" not in section          # the fixture had none


def test_an_8_device_cell_costs_8_gpus(tmp_path, capsys):
    """Issue 59 item 2: a data-parallel cell holds its devices' GPUs, so its dollars are 8 × the
    per-GPU share; before, `usd` and every per-item figure priced it as one GPU (at linear
    scaling an 8-GPU cell read 8× too cheap)."""
    folder = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", folder)
    for path in (folder / "cells").glob("f2cnnkrjax-*.json"):
        record = json.loads(path.read_text())
        record["devices"] = 8
        path.write_text(json.dumps(record))
    priced_run(tmp_path, "base", target=folder)
    capsys.readouterr()
    row = next(r for r in summary_rows(folder) if r["cell_name"].startswith("cnn-fit-keras-jax"))
    per_gpu_s = 29.39 / 8 / 3600
    step_s = float(row["geomean_ms"]) / 1000
    assert float(row["usd_per_1k_items"]) == pytest.approx(8 * per_gpu_s * step_s / 128 * 1000)
    walls = [json.loads(p.read_text())["wall_s"] for p in (folder / "cells").glob("f2cnnkrjax-*")]
    assert float(row["usd"]) == pytest.approx(8 * per_gpu_s * sum(walls))
    assert cost.gpus_held({"on_gpu": False, "devices": 8}) == 1      # a CPU cell: one lane
    assert cost.gpus_held({"on_gpu": True, "devices": 8}) == 8


def test_summary_csv_and_the_findings_in_dollars(base):
    rows = summary_rows(base)
    assert {"usd", "usd_per_1k_items", "usd_per_1m_tokens", "usd_per_epoch",
            "usd_per_image"} <= set(rows[0])
    report = (base / "report.md").read_text(encoding="utf-8")
    findings = report.split("## Findings", 1)[1].split("\n## ", 1)[0]
    said = [line for line in findings.splitlines() if "per 1,000 items against" in line]
    assert said and "× the price, its time " in said[0] and "(95 % CI " in said[0]
    assert said[0].endswith("× the GPUs each holds; list-price estimate)")


def cost_cell(env: str, medians: list[float], **more) -> dict:
    from runner.results.analysis import stats

    spread = stats.across_repeats([{"status": "ok", "samples_ms": [m] * 5} for m in medians])
    return {"environment": env, "label": "cnn (fit)", "batch_size": 128, "status": "ok",
            "on_gpu": True, "devices": 1, **spread, **more}


def test_a_cost_gap_within_noise_is_no_finding():
    """Issue 59 item 9: two runs of one matrix named opposite winners in price (6.53× and
    1.70×): a gap is a finding only where the time ratio's interval excludes 1."""
    def per_item(cell):
        return {**cell, "usd_per_1k_items": cell["geomean_ms"] * 0.01}

    noisy = [per_item(cost_cell("a", [10.0, 30.0, 12.0])), per_item(cost_cell("b", [14.0, 15.0, 13.0]))]
    assert cost.sentences(noisy) == []
    clear = [per_item(cost_cell("a", [10.0, 10.2, 9.9])), per_item(cost_cell("b", [20.0, 20.1, 19.8]))]
    (said,) = cost.sentences(clear)
    assert said.startswith("a runs cnn (fit), batch 128, for ") and "(95 % CI 1.9" in said


def test_per_million_tokens_is_at_the_decode_rate():
    """Before: the rate over whole calls (prefill included) under a title saying decode rate."""
    cell = {**cost_cell("keras-jax", [900.0, 900.0, 900.0]), "task": "generate",
            "workload": "gemma", "items_per_step": 8, "decode_ms_per_token": 13.4,
            "tokens_per_s": 8 * 42 * 1000 / 900.0}
    found = cost.figures(cell, [], PRICE)
    per_gpu_s = 29.39 / 8 / 3600
    assert found["usd_per_1m_tokens"] == pytest.approx(per_gpu_s * 0.0134 / 8 * 1e6)


def test_no_price_no_cost_section(tmp_path):
    folder = tmp_path / "plain"
    shutil.copytree(FIXTURE_RUNS / "base", folder)
    assert cli.main(["report", str(folder)]) == 0
    assert "## Cost" not in (folder / "report.md").read_text(encoding="utf-8")
    assert all(r["usd_per_1k_items"] == "" for r in summary_rows(folder))


def test_versus_in_time_and_price():
    # 1.8× faster at 2.1× the price: each item takes 1/1.8 of the time at 2.1× the rate
    assert cost.versus(1 / 1.8, 2.1) == "1.80× faster at 2.10× the price: 16.7 % dearer per item"
    assert cost.versus(1 / 2.1, 1.8) == "2.10× faster at 1.80× the price: 14.3 % cheaper per item"
    assert cost.versus(1.25, 0.5) == "1.25× slower at 0.500× the price: 37.5 % cheaper per item"
    assert cost.versus(1.0, 1.5) == "as fast at 1.50× the price: 50.0 % dearer per item"
    assert cost.versus(None, 1.0) is None and cost.versus(1.0, None) is None


def test_compare_says_what_b_costs_against_a_and_keeps_the_times_verdict(tmp_path, capsys):
    a = priced_run(tmp_path, "base")
    b = priced_run(tmp_path, "slower", {**PRICE, "usd_per_hour": 14.695,
                                         "per_gpu_usd_per_hour": 14.695 / 8})
    capsys.readouterr()
    code = cli.main(["compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert code == 1                                    # B is slower: cost changes nothing
    line = next(x for x in out.splitlines() if x.startswith("cost: B is "))
    assert "slower at 0.500× the price" in line and "the verdicts are the time's" in line
    assert line in (b / f"compare-{a.name}.md").read_text(encoding="utf-8")


def test_history_show_prices_each_point_against_the_one_before(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    a = priced_run(tmp_path, "base")
    b = priced_run(tmp_path, "slower", {**PRICE, "usd_per_hour": 14.695,
                                         "per_gpu_usd_per_hour": 14.695 / 8})
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert cli.main(["history", "import", str(a), str(b), "--db", url]) == 0
    capsys.readouterr()
    assert cli.main(["history", "show", "cnn-fit-keras-jax-b128", "--db", url]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "$ per 1k items" in out and "at 0.500× the price" in out and "than before" in out


@pytest.mark.browser
def test_the_cost_section_in_chromium(base, chromium, tmp_path):
    dom = chromium("--virtual-time-budget=3000", "--dump-dom", (base / "report.html").as_uri())
    assert "Cost (list-price estimates" in dom
    assert "USD per 1,000 items" in dom and "$29.39/h" in dom
