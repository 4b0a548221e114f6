"""Price tables: the shipped one reads and covers what it promises; a SkyPilot catalog imports
(v7 and v8, GCP's split VM + accelerator rows summed, the 700.0 sentinel dropped, a missing spot
price kept empty, zones collapsed to the cheapest); bad tables are one line, exit 2, nothing
written; NVML's names map to the catalog's accelerators."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from runner import cli
from runner.cost import gpus, prices, skypilot

CATALOGS = Path(__file__).resolve().parent.parent / "fixtures" / "skypilot"
HEADER = ",".join(prices.COLUMNS)


def rows_by(rows, instance, region):
    found = [r for r in rows if r.instance == instance and r.region == region]
    assert len(found) == 1, (instance, region, found)
    return found[0]


def test_the_shipped_table_covers_a100_h100_h200_vms_of_three_providers():
    table = prices.read_table(prices.SHIPPED)
    assert table.shipped and table.providers() == ["aws", "azure", "gcp"]
    accelerators = {r.accelerator for r in table.rows}
    assert {"A100", "A100-80GB", "H100", "H200"} <= accelerators
    assert {r.count for r in table.rows} == {1, 8}
    assert all(r.spot is not None and r.spot < r.price for r in table.rows)
    assert all(r.source for r in table.rows) and table.retrieved_at is not None
    assert len({r.region for r in table.rows}) >= 4


def test_a_table_older_than_90_days_says_so():
    day = datetime.date(2026, 1, 1)
    assert prices.stale_note(day, today=day + datetime.timedelta(days=90)) is None
    note = prices.stale_note(day, today=day + datetime.timedelta(days=91))
    assert note is not None and "91 days old" in note and "prices import" in note


def test_a_v7_catalog_imports_with_gcp_rows_summed_and_sentinels_dropped():
    rows = skypilot.read_catalog(CATALOGS / "v7", datetime.date(2026, 11, 1))
    a100 = rows_by(rows, "a2-highgpu-1g", "us-central1")
    # zone a: 0.73948 + 2.93 (zone b's accelerator price is the 700.0 sentinel: dropped)
    assert (a100.accelerator, a100.count) == ("A100", 1)
    assert a100.price == pytest.approx(3.66948) and a100.spot == pytest.approx(1.46975)
    europe = rows_by(rows, "a2-highgpu-1g", "europe-west4")
    assert europe.price == pytest.approx(3.74406) and europe.spot is None   # no spot for its GPU
    eight = rows_by(rows, "a2-highgpu-8g", "us-central1")
    assert (eight.count, eight.price, eight.spot) == (8, pytest.approx(29.35582),
                                                      pytest.approx(11.758))
    p4d = rows_by(rows, "p4d.24xlarge", "us-east-1")
    assert p4d.price == pytest.approx(32.7726) and p4d.spot == pytest.approx(10.2)  # cheapest zone
    assert not [r for r in rows if r.region == "ap-east-1"]        # 700.0: no price known
    assert rows_by(rows, "p4de.24xlarge", "us-east-1").spot is None   # a 700.0 spot price
    assert not [r for r in rows if r.instance in ("m5.large", "n1-standard-8")]   # no GPU
    assert {r.source for r in rows} == {"SkyPilot catalog v7 aws/vms.csv",
                                       "SkyPilot catalog v7 gcp/vms.csv"}
    assert {r.retrieved_at for r in rows} == {datetime.date(2026, 11, 1)}


def test_a_v8_catalog_imports_with_its_arch_column_and_a_missing_spot_price():
    rows = skypilot.read_catalog(CATALOGS / "v8", datetime.date(2026, 11, 2))
    assert rows_by(rows, "p5.48xlarge", "us-east-1").spot is None
    assert rows_by(rows, "p5.48xlarge", "us-west-2").spot == pytest.approx(22.5)
    h200 = rows_by(rows, "a3-ultragpu-8g", "us-central1")
    assert (h200.accelerator, h200.count) == ("H200", 8)
    assert h200.price == pytest.approx(10.31605 + 74.49392)
    assert h200.spot == pytest.approx(4.1 + 37.2472)
    assert not [r for r in rows if r.instance == "a3-highgpu-8g"]     # its GPUs: the sentinel
    assert rows_by(rows, "p5en.48xlarge", "us-east-1").spot is None
    assert "SkyPilot catalog v8 aws/vms.csv" in {r.source for r in rows}


def test_the_folder_above_the_versions_reads_the_newest():
    rows = skypilot.read_catalog(CATALOGS)
    assert {r.source.split()[2] for r in rows} == {"v8"}


def test_prices_import_writes_a_table_that_a_matrix_can_read(tmp_path, capsys):
    out = tmp_path / "mine.csv"
    assert cli.main(["prices", "import", str(CATALOGS / "v7"), "-o", str(out),
                     "--date", "2026-11-01"]) == 0
    table = prices.read_table(out)
    assert len(table.rows) == 5 and table.retrieved_at == datetime.date(2026, 11, 1)
    assert "price_table" in capsys.readouterr().out
    assert cli.main(["prices", "check", str(out)]) == 0
    assert "5 rows, aws, gcp" in capsys.readouterr().out


@pytest.mark.parametrize("body, problem", [
    ("InstanceType,Region,Price\nx,y,1\n", "missing columns vCPUs, MemoryGiB"),
    (f"{HEADER}\nx,1,1,A100,1,r,-3,,aws,2026-11-01,s\n", "row 2: Price: -3 is negative"),
    (f"{HEADER}\nx,1,1,A100,1,r,abc,,aws,2026-11-01,s\n", "row 2: Price: 'abc' is not a number"),
    (f"{HEADER}\nx,1,1,A100,1,r,1,-1,aws,2026-11-01,s\n", "row 2: SpotPrice: -1 is negative"),
    (f"{HEADER}\nx,1,1,A100,1,r,,,aws,2026-11-01,s\n", "row 2: Price: empty"),
    (f"{HEADER}\nx,1,1,A100,1.5,r,1,,aws,2026-11-01,s\n", "AcceleratorCount: '1.5'"),
    (f"{HEADER}\nx,1,1,A100,1,r,1,,aws,yesterday,s\n", "RetrievedAt: 'yesterday'"),
    (f"{HEADER}\n", "no rows"),
])
def test_a_bad_table_is_one_line_and_exit_2(tmp_path, capsys, body, problem):
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    assert cli.main(["prices", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err and str(path) in err


def test_a_bad_catalog_writes_nothing(tmp_path, capsys):
    folder = tmp_path / "v8" / "aws"
    folder.mkdir(parents=True)
    (folder / "vms.csv").write_text("InstanceType,Price\np5,1\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    assert cli.main(["prices", "import", str(tmp_path / "v8"), "-o", str(out)]) == 2
    assert "missing columns AcceleratorName" in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(["prices", "import", str(tmp_path / "nothing"), "-o", str(out)]) == 2
    assert "not a folder" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("nvml, accelerator", [
    ("NVIDIA A100-SXM4-40GB", "A100"), ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100 80GB PCIe", "A100-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H100 PCIe", "H100"),
    ("NVIDIA H100 NVL", "H100-NVL"), ("NVIDIA H200", "H200"), ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("NVIDIA A10G", "A10G"),
    ("Tesla V100-SXM2-16GB", "V100"), ("Tesla T4", "T4"), ("NVIDIA GeForce RTX 4090", None),
    (None, None),
])
def test_nvml_names_map_to_the_catalogs_accelerators(nvml, accelerator):
    assert gpus.accelerator_of(nvml) == accelerator


def test_the_rows_matching_a_gpu_come_with_its_count_first():
    table = prices.read_table(prices.SHIPPED)
    rows = gpus.matching_rows(table.rows, "NVIDIA H100 80GB HBM3", 8)
    assert rows and all(r.accelerator == "H100" for r in rows)
    assert rows[0].count == 8 and rows[-1].count == 1
    assert rows[0].price == min(r.price for r in rows if r.count == 8)
