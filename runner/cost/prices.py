"""Price tables: SkyPilot's catalog columns (InstanceType, vCPUs, MemoryGiB, AcceleratorName,
AcceleratorCount, Region, Price, SpotPrice) plus Provider, RetrievedAt and Source, one row per
VM type and region, prices in USD per hour of the whole VM. The repository ships a small dated
one (prices.csv beside this module); `python -m runner prices import DIR` makes one from a
SkyPilot catalog folder (skypilot.py); a matrix's [cost] price_table names one of the user's.

A table is read whole and checked row by row: a missing column, an empty, negative or
non-numeric price, a count that is not a whole number or a date that is not YYYY-MM-DD is one
PriceError naming the file, the row and the column."""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("InstanceType", "vCPUs", "MemoryGiB", "AcceleratorName", "AcceleratorCount", "Region",
           "Price", "SpotPrice", "Provider", "RetrievedAt", "Source")
SHIPPED = Path(__file__).with_name("prices.csv")
STALE_DAYS = 90               # a table older than this warns wherever its prices are shown
MAX_PRICE = 1e6               # USD per hour: beyond any VM; a typo, not a price
MAX_ROWS = 200_000
MAX_BYTES = 64 * 2**20         # a table is a few hundred KB; a file far bigger is not one


class PriceError(ValueError):
    """A price table that cannot be used: one line, naming the file, row and column."""


@dataclass(frozen=True)
class PriceRow:
    instance: str
    vcpus: float | None
    memory_gib: float | None
    accelerator: str            # "" for a VM without one
    count: int
    region: str
    price: float                # on-demand USD per hour of the VM
    spot: float | None          # None: the table has no spot price for it
    provider: str
    retrieved_at: datetime.date
    source: str

    def price_for(self, pricing: str) -> float | None:
        return self.spot if pricing == "spot" else self.price

    def csv_row(self) -> list[str]:
        return [self.instance, _number(self.vcpus), _number(self.memory_gib), self.accelerator,
                str(self.count), self.region, _number(self.price), _number(self.spot),
                self.provider, self.retrieved_at.isoformat(), self.source]


@dataclass(frozen=True)
class PriceTable:
    path: Path
    rows: tuple[PriceRow, ...]
    sha256: str

    @property
    def shipped(self) -> bool:
        return self.path.resolve() == SHIPPED.resolve()

    @property
    def retrieved_at(self) -> datetime.date | None:
        """The table's date: its oldest row's."""
        return min((r.retrieved_at for r in self.rows), default=None)

    def providers(self) -> list[str]:
        return sorted({r.provider for r in self.rows})


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def age_days(retrieved_at: datetime.date | str | None,
             today: datetime.date | None = None) -> int | None:
    if retrieved_at is None:
        return None
    if isinstance(retrieved_at, str):
        try:
            retrieved_at = datetime.date.fromisoformat(retrieved_at)
        except ValueError:
            return None
    return ((today or datetime.date.today()) - retrieved_at).days


def stale_note(retrieved_at: datetime.date | str | None,
               today: datetime.date | None = None) -> str | None:
    """A warning when prices are older than STALE_DAYS, else None."""
    days = age_days(retrieved_at, today)
    if days is None or days <= STALE_DAYS:
        return None
    return (f"the prices are {days} days old (retrieved {retrieved_at}; over {STALE_DAYS}): "
            "import a current SkyPilot catalog with python -m runner prices import DIR")


def read_table(path: Path) -> PriceTable:
    """A price table, checked (PriceError when it cannot be used)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise PriceError(f"{path}: over {MAX_BYTES // 2**20} MB, not a price table")
        data = path.read_bytes()
    except OSError as exc:
        raise PriceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PriceError(f"{path}: not a UTF-8 text file") from None
    return PriceTable(path, tuple(parse_rows(text, str(path))), hashlib.sha256(data).hexdigest())


def parse_rows(text: str, where: str) -> list[PriceRow]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise PriceError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (a price table has {', '.join(COLUMNS)})")
    reader.fieldnames = header
    rows: list[PriceRow] = []
    for line, raw in enumerate(reader, start=2):
        if len(rows) >= MAX_ROWS:
            raise PriceError(f"{where}: more than {MAX_ROWS} rows")
        if not any((v or "").strip() for v in raw.values() if isinstance(v, str)):
            continue                                    # a blank line
        rows.append(parse_row(raw, f"{where}: row {line}"))
    if not rows:
        raise PriceError(f"{where}: no rows")
    return rows


def parse_row(raw: dict[str, str | None], where: str) -> PriceRow:
    def text(column: str) -> str:
        value = (raw.get(column) or "").strip()
        if not value.isprintable():
            raise PriceError(f"{where}: {column}: holds a control character")
        return value

    instance, provider, region = text("InstanceType"), text("Provider"), text("Region")
    for column, value in (("InstanceType", instance), ("Provider", provider), ("Region", region)):
        if not value:
            raise PriceError(f"{where}: {column}: empty")
    price = _price(text("Price"), f"{where}: Price")
    if price is None:
        raise PriceError(f"{where}: Price: empty (a row needs its on-demand price)")
    count = _number_in(text("AcceleratorCount") or "0", f"{where}: AcceleratorCount")
    if count is None or count != int(count) or count < 0:
        raise PriceError(f"{where}: AcceleratorCount: {text('AcceleratorCount')!r} is not a "
                         "whole number of GPUs")
    try:
        retrieved = datetime.date.fromisoformat(text("RetrievedAt"))
    except ValueError:
        raise PriceError(f"{where}: RetrievedAt: {text('RetrievedAt')!r} is not a date "
                         "(YYYY-MM-DD)") from None
    return PriceRow(instance, _number_in(text("vCPUs"), f"{where}: vCPUs"),
                    _number_in(text("MemoryGiB"), f"{where}: MemoryGiB"),
                    text("AcceleratorName"), int(count), region, price,
                    _price(text("SpotPrice"), f"{where}: SpotPrice"), provider.lower(),
                    retrieved, text("Source"))


def _number_in(value: str, where: str) -> float | None:
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise PriceError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise PriceError(f"{where}: {value!r} is not a finite number")
    return number


def _price(value: str, where: str) -> float | None:
    number = _number_in(value, where)
    if number is not None and number < 0:
        raise PriceError(f"{where}: {value} is negative")
    if number is not None and number > MAX_PRICE:
        raise PriceError(f"{where}: {value} USD per hour is beyond any VM")
    return number


def table_csv(rows: list[PriceRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(r.csv_row() for r in rows)
    return buffer.getvalue()
