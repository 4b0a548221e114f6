"""doctor names the price table's VMs with the GPUs it sees (never blocking a run)."""

from __future__ import annotations

from runner.machine.checks import check_prices


def test_doctor_lists_the_vms_with_this_machines_gpus():
    check = check_prices({"gpu_name": "NVIDIA A100-SXM4-40GB", "gpu_count": 8})
    assert check.ok and not check.blocking
    assert check.detail.startswith("NVIDIA A100-SXM4-40GB → A100: ")
    first = check.detail.split(": ", 1)[1].split("; ")[0]
    assert "(8)" in first                                  # a VM with 8 of them first
    assert "list prices of 2025-06-30; old" in check.detail


def test_a_gpu_without_a_name_in_the_catalog_says_what_to_do():
    check = check_prices({"gpu_name": "NVIDIA GeForce RTX 4090", "gpu_count": 1})
    assert not check.ok and not check.blocking
    assert "no accelerator name known" in check.detail and "price_per_hour" in check.detail
    assert "[cost]" in check.fix
