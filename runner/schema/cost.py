"""The matrix's [cost] table: which VM the run pays for (an instance of a price table, or an
accelerator and a count), on which provider, region and pricing, or a price of its own; the
price table to read; and the budget that stops a run. runner/cost/ reads it (pricing.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from .values import Strict, no_control

PRICINGS = ("on_demand", "spot")
MAX_GPUS = 1024                 # a VM's GPUs: [cost] count, and a price table's AcceleratorCount


class CostSettings(Strict):
    # The VM as the price table names it (SkyPilot's InstanceType, e.g. "a2-highgpu-1g") ...
    instance: str | None = Field(None, min_length=1, max_length=100)
    # ... or its GPUs: the table's AcceleratorName ("A100", "A100-80GB", "H100", "H200") and
    # how many the VM has (default 1); the cheapest matching row is taken.
    accelerator: str | None = Field(None, min_length=1, max_length=50)
    count: PositiveInt | None = Field(None, le=MAX_GPUS)
    provider: str | None = Field(None, min_length=1, max_length=50)    # aws | gcp | azure | …
    region: str | None = Field(None, min_length=1, max_length=100)
    pricing: Literal["on_demand", "spot"] = "on_demand"
    # USD per hour of the whole VM: overrides the table's price (the table still names the
    # VM's GPU count when an instance or accelerator is given).
    price_per_hour: float | None = Field(None, ge=0.0, le=1e6)
    # A price table of your own (the shipped table's columns; `python -m runner prices import`
    # makes one from a SkyPilot catalog), relative to the matrix; default: the shipped one.
    price_table: str | None = Field(None, min_length=1)
    # Stop the run (before a cell × repeat) when what it has cost plus that cell's estimate
    # would pass this many USD (--budget overrides it).
    budget: PositiveFloat | None = Field(None, le=1e9)

    @field_validator("instance", "accelerator", "provider", "region", "price_table",
                     mode="after")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return no_control(value)

    @model_validator(mode="after")
    def _one_vm(self) -> CostSettings:
        if self.instance is not None and self.accelerator is not None:
            raise ValueError("give instance or accelerator (+ count), not both")
        if self.count is not None and self.accelerator is None:
            raise ValueError("count goes with accelerator (an instance's table row says its "
                             "GPU count)")
        if self.instance is None and self.accelerator is None and self.price_per_hour is None:
            raise ValueError("name the VM: instance = '<InstanceType>', accelerator = "
                             "'<AcceleratorName>' (+ count), or price_per_hour = <USD>")
        return self
