"""The price a run pays: the VM a matrix's [cost] names, looked up in its price table (the
shipped one unless price_table says otherwise), or the price_per_hour it gives. Every figure
made from it is a list-price estimate, labelled with the table's source and date.

A record's `usd` is its wall time × the per-GPU share of the VM's price × the GPUs the cell
holds (its devices on a GPU: a data-parallel cell on 8 GPUs pays for 8); the estimate and the
budget count the whole VM's price over the run's wall time (builds and calibration included,
the cells packed into the lanes as the scheduler runs them), as the bill would."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError, did_you_mean
from ..schema.cost import CostSettings
from .prices import SHIPPED, PriceError, PriceRow, PriceTable, read_table, stale_note

LABEL = "list-price estimate"


@dataclass(frozen=True)
class RunPrice:
    """What a run pays per hour, where that figure comes from, and how old it is."""

    usd_per_hour: float              # the whole VM
    gpus: int                        # the VM's GPUs (1 when it has none: the share is the VM)
    pricing: str                     # on_demand | spot
    source: str                      # "price table" | "price_per_hour"
    instance: str | None = None
    accelerator: str | None = None
    provider: str | None = None
    region: str | None = None
    table: str | None = None         # the table's path
    table_sha256: str | None = None
    retrieved_at: str | None = None  # the row's date (YYYY-MM-DD)
    row_source: str | None = None    # the row's Source column
    alternatives: int = 1            # rows that matched; the cheapest was taken

    @property
    def per_gpu_usd_per_hour(self) -> float:
        return self.usd_per_hour / max(1, self.gpus)

    def usd_for(self, seconds: float, gpus: int = 1) -> float:
        """A cell's share: its wall time × the per-GPU price × the GPUs it holds."""
        return seconds / 3600.0 * self.per_gpu_usd_per_hour * gpus

    def vm_usd_for(self, seconds: float) -> float:
        return seconds / 3600.0 * self.usd_per_hour

    def stale(self) -> str | None:
        return stale_note(self.retrieved_at) if self.source == "price table" else None

    def text(self) -> str:
        """One line: what the VM is and what it costs."""
        vm = " ".join(p for p in (self.provider, self.instance, self.region) if p)
        gpus = f"{self.gpus} × {self.accelerator}" if self.accelerator else f"{self.gpus} GPU(s)"
        where = f"{vm} ({gpus})" if vm else gpus
        choice = (f", the cheapest of {self.alternatives} matching rows"
                  if self.alternatives > 1 else "")
        origin = (f"{Path(self.table or '').name} of {self.retrieved_at}{choice}"
                  if self.source == "price table" else "[cost] price_per_hour")
        return (f"{where}, {self.pricing.replace('_', '-')}: ${self.usd_per_hour:.2f}/h "
                f"(${self.per_gpu_usd_per_hour:.2f}/h per GPU; {LABEL}, {origin})")

    def entry(self) -> dict[str, Any]:
        """The manifest's cost.price."""
        return {**asdict(self), "per_gpu_usd_per_hour": self.per_gpu_usd_per_hour,
                "label": LABEL}


def table_for(cost: CostSettings, matrix_dir: Path) -> PriceTable:
    path = Path(cost.price_table).expanduser() if cost.price_table else SHIPPED
    if not path.is_absolute():
        path = matrix_dir / path
    return read_table(path)


def resolve(cost: CostSettings | None, matrix_path: Path) -> RunPrice | None:
    """The run's price from its [cost] table (None without one); UsageError (one line) when the
    table cannot be read or names no such VM."""
    if cost is None:
        return None
    where = f"{matrix_path}: cost"
    try:
        table = table_for(cost, matrix_path.parent)
    except PriceError as exc:
        raise UsageError(f"{where}.price_table: {exc}") from None
    if cost.instance is None and cost.accelerator is None:
        assert cost.price_per_hour is not None        # the schema asks for one of the three
        return RunPrice(cost.price_per_hour, cost.count or 1, cost.pricing, "price_per_hour",
                        provider=cost.provider, region=cost.region)
    rows, alternatives = choose_rows(table, cost, where)
    row = rows[0]
    if cost.price_per_hour is not None:
        return RunPrice(cost.price_per_hour, max(1, row.count), cost.pricing, "price_per_hour",
                        row.instance, row.accelerator or None, row.provider, row.region)
    price = row.price_for(cost.pricing)
    assert price is not None                          # choose_rows kept priced rows only
    return RunPrice(price, max(1, row.count), cost.pricing, "price table", row.instance,
                    row.accelerator or None, row.provider, row.region, str(table.path),
                    table.sha256, row.retrieved_at.isoformat(), row.source, alternatives)


def choose_rows(table: PriceTable, cost: CostSettings, where: str) -> tuple[list[PriceRow], int]:
    """The rows [cost] names, cheapest first, and how many matched; UsageError naming what
    the table lacks."""
    rows: list[PriceRow] = list(table.rows)
    if cost.instance is not None:
        rows = [r for r in rows if r.instance.lower() == cost.instance.lower()]
        if not rows:
            known = sorted({r.instance for r in table.rows})
            raise UsageError(f"{where}.instance: {cost.instance!r} is not in {table.path}"
                             f"{did_you_mean(cost.instance, known)}")
    else:
        assert cost.accelerator is not None
        count = cost.count or 1
        named = [r for r in rows if r.accelerator.lower() == cost.accelerator.lower()]
        if not named:
            known = sorted({r.accelerator for r in table.rows if r.accelerator})
            raise UsageError(f"{where}.accelerator: {cost.accelerator!r} is not in {table.path}"
                             f"{did_you_mean(cost.accelerator, known)}")
        rows = [r for r in named if r.count == count]
        if not rows:
            counts = sorted({r.count for r in named})
            raise UsageError(f"{where}.count: no VM with {count} × {cost.accelerator} in "
                             f"{table.path} (it has {', '.join(map(str, counts))})")
    for key in ("provider", "region"):
        wanted = getattr(cost, key)
        if wanted is not None:
            kept = [r for r in rows if getattr(r, key).lower() == wanted.lower()]
            if not kept:
                known = sorted({getattr(r, key) for r in rows})
                raise UsageError(f"{where}.{key}: {wanted!r} has no such VM in {table.path} "
                                 f"(it has {', '.join(known)}){did_you_mean(wanted, known)}")
            rows = kept
    priced = [r for r in rows if r.price_for(cost.pricing) is not None]
    if not priced and cost.price_per_hour is None:
        raise UsageError(f"{where}.pricing: {table.path} has no spot price for "
                         f"{rows[0].instance} (use pricing = 'on_demand' or price_per_hour)")
    priced = priced or rows
    priced.sort(key=lambda r: (r.price_for(cost.pricing) or 0.0, r.provider, r.region))
    return priced, len(priced)
