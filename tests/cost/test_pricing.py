"""A matrix's [cost]: the VM it names priced from the shipped table or the user's own, the
per-GPU share and the arithmetic against hand-computed values; bad input (an instance not in
the table, a table with a missing column or a negative price, a budget ≤ 0, --budget without
a price) is one line, exit 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import schema
from runner.cost import pricing, prices
from runner.errors import UsageError
from tests.matrices import matrix_text, this_interpreter

HEADER = ",".join(prices.COLUMNS)


def cost(**keys):
    return schema.CostSettings(**keys)


def test_an_instance_is_priced_from_the_shipped_table(tmp_path):
    price = pricing.resolve(cost(instance="p4d.24xlarge"), tmp_path / "m.toml")
    assert (price.usd_per_hour, price.gpus, price.accelerator) == (21.96, 8, "A100")
    assert price.per_gpu_usd_per_hour == pytest.approx(21.96 / 8)
    assert price.alternatives == 2                  # us-east-1 and us-west-2, the same price
    assert price.source == "price table" and price.retrieved_at == "2025-06-30"
    assert price.table_sha256 == prices.read_table(prices.SHIPPED).sha256
    assert price.stale() is not None                # the shipped table is old: it says so
    assert "list-price estimate" in price.text()


def test_an_accelerator_and_count_take_the_cheapest_vm_of_the_provider_and_region(tmp_path):
    where = tmp_path / "m.toml"
    cheapest = pricing.resolve(cost(accelerator="H100", count=8), where)
    assert (cheapest.instance, cheapest.usd_per_hour) == ("p5.48xlarge", 55.04)
    gcp = pricing.resolve(cost(accelerator="h100", count=8, provider="gcp",
                               region="europe-west4", pricing="spot"), where)
    assert (gcp.instance, gcp.usd_per_hour, gcp.pricing) == ("a3-highgpu-8g", 29.30, "spot")
    one = pricing.resolve(cost(accelerator="A100"), where)          # count defaults to 1
    assert (one.instance, one.gpus, one.usd_per_hour) == ("a2-highgpu-1g", 1, 3.67)


def test_price_per_hour_overrides_the_table_but_keeps_its_gpu_count(tmp_path):
    where = tmp_path / "m.toml"
    price = pricing.resolve(cost(instance="a2-highgpu-8g", region="us-central1",
                                 price_per_hour=20.0), where)
    assert (price.usd_per_hour, price.gpus, price.source) == (20.0, 8, "price_per_hour")
    assert price.stale() is None
    alone = pricing.resolve(cost(price_per_hour=3.0, count=None), where)
    assert (alone.usd_per_hour, alone.gpus) == (3.0, 1)


def test_the_arithmetic_against_hand_computed_values(tmp_path):
    price = pricing.resolve(cost(instance="a2-highgpu-8g", region="us-central1"), tmp_path / "m")
    # 29.39 $/h for 8 GPUs: one GPU for 90 s is 29.39 / 8 / 3600 * 90 = 0.0918437...
    assert price.usd_for(90.0) == pytest.approx(0.09184375)
    assert price.usd_for(90.0, gpus=2) == pytest.approx(0.1836875)
    assert price.vm_usd_for(1800.0) == pytest.approx(14.695)


def test_a_table_of_your_own_beside_the_matrix(tmp_path):
    (tmp_path / "mine.csv").write_text(
        f"{HEADER}\nmy-vm,8,32,A100-80GB,2,lab,10,4,onprem,2026-11-20,our finance team\n",
        encoding="utf-8")
    price = pricing.resolve(cost(instance="my-vm", price_table="mine.csv"), tmp_path / "m.toml")
    assert (price.provider, price.per_gpu_usd_per_hour, price.row_source) == \
        ("onprem", 5.0, "our finance team")


@pytest.mark.parametrize("keys, message", [
    ({"instance": "p4d.24xlarg"}, "cost.instance: 'p4d.24xlarg' is not in"),
    ({"accelerator": "B300"}, "cost.accelerator: 'B300' is not in"),
    ({"accelerator": "H200", "count": 1}, "cost.count: no VM with 1 × H200"),
    ({"instance": "p5.48xlarge", "region": "mars-1"}, "cost.region: 'mars-1' has no such VM"),
])
def test_a_vm_the_table_lacks_is_one_line(tmp_path, keys, message):
    with pytest.raises(UsageError, match=message):
        pricing.resolve(cost(**keys), tmp_path / "m.toml")


def test_the_instance_error_suggests_the_name_meant(tmp_path):
    with pytest.raises(UsageError, match="did you mean 'p4d.24xlarge'"):
        pricing.resolve(cost(instance="p4d.24xlarg"), tmp_path / "m.toml")


def priced_matrix(cost_table: dict | None) -> str:
    """One selftest cell on this interpreter, with `cost_table` as its [cost] (None: none)."""
    return matrix_text("priced", steps=2, profile="smoke", environments={"numpy": this_interpreter()},
                       benchmarks=[{"workload": "selftest", "environments": ["numpy"]}],
                       tables=None if cost_table is None else {"cost": cost_table})


@pytest.mark.parametrize("cost_table, args, problem", [
    ({"instance": "nope"}, (), "cost.instance: 'nope' is not in"),
    ({"instance": "p5.4xlarge", "budget": 0}, (), "cost.budget: must be > 0"),
    ({"instance": "p5.4xlarge", "budget": -3}, (), "cost.budget: must be > 0"),
    (None, ("--budget", "5"), "--budget 5: needs a price: add a [cost] table"),
    ({"instance": "p5.4xlarge"}, ("--budget", "0"), "expected a number above 0"),
    ({"instance": "p5.4xlarge"}, ("--max-hours", "-1"), "expected a number above 0"),
    ({"instance": "p5.4xlarge", "price_table": "bad.csv"}, (), "missing column"),
    ({"instance": "x", "price_table": "negative.csv"}, (), "Price: -1 is negative"),
    ({"region": "us-east-1"}, (), "name the VM"),
    ({"instance": "p5.4xlarge", "acelerator": "H100"}, (), "unknown key"),
])
def test_bad_cost_input_is_one_line_exit_2_and_nothing_written(tmp_path, run_cli, results_dir,
                                                              cost_table, args, problem):
    (tmp_path / "bad.csv").write_text("InstanceType,Price\nx,1\n", encoding="utf-8")
    (tmp_path / "negative.csv").write_text(
        f"{HEADER}\nx,1,1,H100,1,r,-1,,aws,2026-11-01,s\n", encoding="utf-8")
    matrix = tmp_path / "m.toml"
    matrix.write_text(priced_matrix(cost_table), encoding="utf-8")
    code, out, err = run_cli(matrix, *args)
    assert code == 2, out + err
    assert err.count("\n") == 1 and problem in err, err
    assert "Traceback" not in err
    assert list(results_dir.iterdir()) == []


def test_plan_prints_the_price_and_the_estimated_cost(tmp_path, run_cli):
    matrix = tmp_path / "m.toml"
    matrix.write_text(priced_matrix({"instance": "a2-highgpu-1g", "region": "us-central1",
                                     "budget": 2.5}), encoding="utf-8")
    code, out, err = run_cli("plan", matrix)
    assert code == 0, err
    assert "cost: gcp a2-highgpu-1g us-central1 (1 × A100), on-demand: $3.67/h" in out
    estimate = next(line for line in out.splitlines() if line.startswith("estimate: "))
    assert "$" in estimate and "1 runs" in estimate and "[1 default]" in estimate
    assert "stops before passing the budget $2.50" in estimate
    assert "days old" in out                          # the shipped table's age, said
    assert Path(tmp_path / "results").exists() and not list((tmp_path / "results").iterdir())
