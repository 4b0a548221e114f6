"""A SkyPilot catalog folder (the one SkyPilot keeps, e.g. ~/.sky/catalogs/v8, with one
<cloud>/vms.csv per cloud) read into a price table's rows, offline:

- schema v7 and v8 (v8 adds an Arch column; both are read by their headers, in any order);
- one row per VM type and region: a catalog's rows per availability zone collapse to the
  cheapest (SkyPilot picks the cheapest zone too);
- GPU VMs only (AcceleratorCount ≥ 1): the runner prices GPU runs;
- GCP lists an A100/H100/H200 VM (a2-*, a3-*, a4-*) and its accelerators as separate rows (the
  VM without GPUs, the GPUs with an empty InstanceType): each VM row is summed with the
  accelerator row of its family and count in the same zone;
- SkyPilot's sentinel 700.0 (no price known) drops a row's price (a spot price alone becomes
  empty); an empty spot price stays empty."""

from __future__ import annotations

import csv
import datetime
import io
import math
import re
from collections.abc import Iterator
from pathlib import Path

from ..schema.cost import MAX_GPUS
from .prices import PriceError, PriceRow, csv_rows, read_bounded

SENTINEL = 700.0
NEEDED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Region", "Price", "SpotPrice")
# GCP's GPU VM families: the accelerator a VM of the family carries (its count is in the name)
GCP_FAMILIES = (("a2-highgpu-", "A100"), ("a2-megagpu-", "A100"), ("a2-ultragpu-", "A100-80GB"),
                ("a3-highgpu-", "H100"), ("a3-edgegpu-", "H100"), ("a3-megagpu-", "H100-MEGA"),
                ("a3-ultragpu-", "H200"), ("a4-highgpu-", "B200"))
GCP_COUNT = re.compile(r"-(\d+)g(?:-[a-z]+)?$")

Key = tuple[str, str]      # (instance, region)


def catalog_files(folder: Path) -> list[tuple[str, str, Path]]:
    """(cloud, schema version, vms.csv) of a catalog folder: the folder of one version (v8/,
    holding aws/vms.csv, gcp/vms.csv, …) or one above it (catalogs/, holding v7/ and v8/: the
    newest is read)."""
    if not folder.is_dir():
        raise PriceError(f"{folder}: not a folder (give a SkyPilot catalog folder, e.g. "
                         "~/.sky/catalogs/v8)")
    versions = sorted((p for p in folder.iterdir() if re.fullmatch(r"v\d+", p.name)),
                      key=lambda p: int(p.name[1:]))
    if versions and not list(folder.glob("*/vms.csv")):
        folder = versions[-1]
    files = sorted(folder.glob("*/vms.csv"))
    if not files:
        raise PriceError(f"{folder}: no <cloud>/vms.csv in it (a SkyPilot catalog folder, "
                         "schema v7 or v8)")
    version = folder.name if re.fullmatch(r"v\d+", folder.name) else ""
    return [(f.parent.name.lower(), version, f) for f in files]


def read_catalog(folder: Path, date: datetime.date | None = None) -> list[PriceRow]:
    """Every GPU VM of the catalog folder as price rows, cheapest zone per region. `date`: when
    the catalog was retrieved (default: each vms.csv's modification date)."""
    rows: list[PriceRow] = []
    for cloud, version, path in catalog_files(folder):
        retrieved = date or datetime.date.fromtimestamp(path.stat().st_mtime)
        records = list(_read_csv(path))
        schema = version or ("v8" if records and "Arch" in records[0] else "v7")
        source = f"SkyPilot catalog {schema} {cloud}/vms.csv"
        merged = gcp_rows(records, str(path)) if cloud == "gcp" else gpu_rows(records, str(path))
        rows += [PriceRow(instance, fields["vCPUs"], fields["MemoryGiB"], fields["accelerator"],
                          fields["count"], region, fields["price"], fields["spot"], cloud,
                          retrieved, source)
                 for (instance, region), fields in sorted(merged.items())]
    if not rows:
        raise PriceError(f"{folder}: no GPU VM with a price in its catalog")
    return rows


def _read_csv(path: Path) -> Iterator[dict[str, str]]:
    """A vms.csv's rows: a regular file within MAX_BYTES, at most MAX_ROWS rows (each refused
    before it is read whole)."""
    try:
        text = read_bounded(path, "a SkyPilot vms.csv").decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PriceError(f"{path}: not a UTF-8 text file") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = reader.fieldnames or []
    except csv.Error as exc:
        raise PriceError(f"{path}: row 1: {exc}") from None
    missing = [c for c in NEEDED if c not in fields]
    if missing:
        raise PriceError(f"{path}: missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (not a SkyPilot vms.csv, v7 or v8)")
    for _, raw in csv_rows(reader, str(path)):
        yield {k: (v or "").strip() for k, v in raw.items() if isinstance(k, str)}


def price_of(text: str, where: str) -> float | None:
    """A catalog price: None when empty or the sentinel; PriceError when not a number or
    negative."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise PriceError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise PriceError(f"{where}: {text!r} is not a price")
    return None if value == SENTINEL else value


def _count(text: str, where: str) -> int:
    """A row's GPUs (a fraction of one, as some clouds sell, is none); beyond what [cost]
    accepts, or not finite, is refused."""
    try:
        value = float(text) if text else 0.0
    except ValueError:
        return 0                                    # no count: not a GPU VM
    if not math.isfinite(value) or value > MAX_GPUS:
        raise PriceError(f"{where}: {text!r} is not a number of GPUs from 0 to {MAX_GPUS}")
    return int(value)


def _number(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _keep_cheapest(found: dict[Key, dict], key: Key, fields: dict) -> None:
    """One row per VM type and region: the cheapest zone's price, and its cheapest spot."""
    old = found.get(key)
    if old is None:
        found[key] = fields
        return
    spots = [s for s in (old["spot"], fields["spot"]) if s is not None]
    found[key] = {**(old if old["price"] <= fields["price"] else fields),
                  "spot": min(spots) if spots else None}


def gpu_rows(records: list[dict[str, str]], where: str = "vms.csv") -> dict[Key, dict]:
    """AWS, Azure and the other clouds: each row is a whole VM with its GPUs."""
    found: dict[Key, dict] = {}
    for n, raw in enumerate(records, start=2):
        count = _count(raw["AcceleratorCount"], f"{where}: row {n}: AcceleratorCount")
        if count < 1 or not raw["InstanceType"] or not raw["AcceleratorName"]:
            continue
        price = price_of(raw["Price"], f"{where}: row {n}: Price")
        if price is None:
            continue
        fields = {"vCPUs": _number(raw.get("vCPUs", "")),
                  "MemoryGiB": _number(raw.get("MemoryGiB", "")),
                  "accelerator": raw["AcceleratorName"], "count": count, "price": price,
                  "spot": price_of(raw["SpotPrice"], f"{where}: row {n}: SpotPrice")}
        _keep_cheapest(found, (raw["InstanceType"], raw["Region"]), fields)
    return found


def gcp_family(instance: str) -> tuple[str, int] | None:
    """(accelerator, count) of a GCP GPU VM type, from its family and its name's -<N>g."""
    count = GCP_COUNT.search(instance)
    for prefix, accelerator in GCP_FAMILIES:
        if instance.startswith(prefix) and count:
            return accelerator, int(count.group(1))
    return None


def gcp_rows(records: list[dict[str, str]], where: str = "gcp/vms.csv") -> dict[Key, dict]:
    """GCP: each A100/H100/H200 VM row plus the accelerator row of its GPUs in its zone."""
    accelerators: dict[tuple[str, int, str, str], tuple[float | None, float | None]] = {}
    for n, raw in enumerate(records, start=2):
        if not raw["InstanceType"] and raw["AcceleratorName"]:
            key = (raw["AcceleratorName"].lower(),
                   _count(raw["AcceleratorCount"], f"{where}: row {n}: AcceleratorCount"),
                   raw["Region"], raw.get("AvailabilityZone", ""))
            accelerators[key] = (price_of(raw["Price"], f"{where}: row {n}: Price"),
                                 price_of(raw["SpotPrice"], f"{where}: row {n}: SpotPrice"))
    found = gpu_rows([r for r in records if r["InstanceType"]], where)   # rows that carry GPUs
    for n, raw in enumerate(records, start=2):
        family = gcp_family(raw["InstanceType"]) if not raw["AcceleratorName"] else None
        if family is None:
            continue
        name, count = family
        parts = accelerators.get((name.lower(), count, raw["Region"],
                                  raw.get("AvailabilityZone", "")))
        vm_price = price_of(raw["Price"], f"{where}: row {n}: Price")
        if parts is None or parts[0] is None or vm_price is None:
            continue                               # no price for the VM or its GPUs there
        vm_spot = price_of(raw["SpotPrice"], f"{where}: row {n}: SpotPrice")
        spot = vm_spot + parts[1] if vm_spot is not None and parts[1] is not None else None
        fields = {"vCPUs": _number(raw.get("vCPUs", "")),
                  "MemoryGiB": _number(raw.get("MemoryGiB", "")), "accelerator": name,
                  "count": count, "price": round(vm_price + parts[0], 5),
                  "spot": round(spot, 5) if spot is not None else None}
        _keep_cheapest(found, (raw["InstanceType"], raw["Region"]), fields)
    return found
