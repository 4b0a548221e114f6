"""Price tables: SkyPilot's catalog columns (InstanceType, vCPUs, MemoryGiB, AcceleratorName,
AcceleratorCount, Region, Price, SpotPrice) plus Provider, RetrievedAt and Source, one row per
VM type and region, prices in USD per hour of the whole VM. The repository ships a small dated
one (prices.csv beside this module); `python -m runner prices import DIR` makes one from a
SkyPilot catalog folder (skypilot.py); a matrix's [cost] price_table names one of the user's.

A table is a regular file (never a device or a FIFO), refused by its size before a byte is read,
and checked row by row (its rows capped while they are read): a missing column, an empty,
negative or non-numeric price, a count that is not a whole number of at most MAX_GPUS, or a date
that is not YYYY-MM-DD is one PriceError naming the file, the row and the column. What the runner
writes of a table has no cell a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..schema.cost import MAX_GPUS

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
        return [inert(self.instance), _number(self.vcpus), _number(self.memory_gib),
                inert(self.accelerator), str(self.count), inert(self.region),
                _number(self.price), _number(self.spot), inert(self.provider),
                self.retrieved_at.isoformat(), inert(self.source)]


def inert(text: str) -> str:
    """A text cell a spreadsheet opens as text: one that starts as a formula would (=, +, -,
    @, a tab or a carriage return) is written after a quote (OWASP's CSV injection advice)."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


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


def read_bounded(path: Path, what: str) -> bytes:
    """A regular file's bytes, refused by its size before a byte is read (PriceError): never a
    device (/dev/zero grows without end) or a FIFO (a read waits for a writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                raise PriceError(f"{path}: not a regular file (a device, a FIFO or a socket), "
                                 f"not {what}")
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PriceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if status.st_size > MAX_BYTES or len(data) > MAX_BYTES:
        raise PriceError(f"{path}: over {MAX_BYTES // 2**20} MB, not {what}")
    return data


def read_table(path: Path) -> PriceTable:
    """A price table, checked (PriceError when it cannot be used)."""
    data = read_bounded(path, "a price table")
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
    for line, raw in csv_rows(reader, where):
        if not any((v or "").strip() for v in raw.values() if isinstance(v, str)):
            continue                                    # a blank line
        rows.append(parse_row(raw, f"{where}: row {line}"))
    if not rows:
        raise PriceError(f"{where}: no rows")
    return rows


def csv_rows(reader: csv.DictReader, where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV file, at most MAX_ROWS of them (refused while reading, before the
    next is held), each field within csv's limit (PriceError otherwise)."""
    number = 1                                  # the header's
    try:
        for raw in reader:
            number += 1
            if number - 1 > MAX_ROWS:
                raise PriceError(f"{where}: more than {MAX_ROWS} rows")
            yield number, raw
    except csv.Error as exc:                    # raised reading the row after `number`
        raise PriceError(f"{where}: row {number + 1}: {exc}") from None


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
    count = gpu_count(text("AcceleratorCount"), f"{where}: AcceleratorCount")
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


def gpu_count(value: str, where: str) -> int:
    """A VM's GPUs: a whole number from 0 to MAX_GPUS (what [cost] count accepts); empty is 0."""
    try:
        count = float(value or "0")
    except ValueError:
        count = math.nan
    if not math.isfinite(count) or count != int(count) or not 0 <= count <= MAX_GPUS:
        raise PriceError(f"{where}: {value!r} is not a whole number of GPUs from 0 to "
                         f"{MAX_GPUS}")
    return int(count)


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
