"""What a tuning leaves (`python -m runner tune`, docs/tuned.md): a folder of its own under the
matrix's results, results/<name>/tuning/<timestamp>/, apart from the run folders (it has no
manifest.json: neither `--resume` nor `history import` takes it for a run):

  tuning.json                  what was tuned: the matrix, the budget, the machine, how it ended
  tuned.toml                   per cell of the tuned tier: the knobs chosen, keyed by the GPU
                               model and the stack they were found on
  tuning/<cell id>/probes.jsonl   every probe: knobs, status, ms/step, compile s, peak memory,
                               answer check, why it was pruned
  cells/<probe>-r<rung>.json   each probe's record (ledger-verified like a run's), logs/

A run's tuned cells read tuned.toml (runner/run/tiers.py): the newest folder that has the cell
for this GPU model and stack, or the folders `--tuning` names. Every file is written atomically;
a tuned.toml read back is untrusted input (it travels between machines): bounded, validated,
one clear line when it is not what the runner wrote.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from ...errors import UsageError
from ...worker.protocol import write_text_atomic
from .untrusted import read_file

TUNED = "tuned.toml"
MANIFEST = "tuning.json"
PROBES = "probes.jsonl"
FOLDER = "tuning"                 # results/<name>/tuning/<timestamp>/, and its per-cell folders
MAX_TUNED_BYTES = 4 << 20         # a page per cell: far more than any matrix tunes

# How a cell's search ended (tuned.toml's status).
TUNED_STATUS, DEFAULTS_WON, NO_KNOBS = "tuned", "defaults won", "no knobs"
BUDGET_SPENT, NOTHING_RAN = "budget spent", "no probe ran"
STATUSES = (TUNED_STATUS, DEFAULTS_WON, NO_KNOBS, BUDGET_SPENT, NOTHING_RAN)


@dataclass(frozen=True)
class Tuned:
    """One cell's tuning: its defaults cell's name (the key), what it was found on, the knobs
    chosen (off their defaults only: {} keeps the defaults), and what the search cost."""

    cell: str                      # the defaults cell's name
    gpu: str                       # the GPU model, or "cpu"
    stack: str                     # the environment's lock digest or image reference ("": none)
    knobs: dict[str, Any] = field(default_factory=dict)
    status: str = TUNED_STATUS
    probes: int = 0
    minutes: float = 0.0
    budget_minutes: float | None = None    # the search's budget (the same for every cell)
    usd: float | None = None
    probe_gain: float | None = None    # defaults ÷ winner in the probes: selected, so biased
    source: str = ""               # the tuning folder it was read from (not written)

    def matches(self, gpu: str, stack: str) -> bool:
        return self.gpu == gpu and (not self.stack or not stack or self.stack == stack)


def tuning_root(results_dir: Path, name: str) -> Path:
    return Path(results_dir) / name / FOLDER


def cell_folder(root: Path, cell_id: str) -> Path:
    return root / FOLDER / cell_id


def write_tuned(root: Path, entries: Mapping[str, Tuned], matrix: str) -> None:
    """tuned.toml, every entry (atomic: a reader sees the old file or the new one)."""
    cells = {}
    for name, entry in entries.items():
        row = {k: v for k, v in asdict(entry).items()
               if k not in ("cell", "source") and v is not None}
        row["knobs"] = {k: v for k, v in entry.knobs.items() if v is not None}
        cells[name] = row
    text = (f"# python -m runner tune {matrix}: per cell of the tuned tier, the knobs the search "
            "chose\n# (docs/tuned.md). Probe times are selected, so biased: a run re-measures "
            "them.\n" + tomli_w.dumps({"cells": cells}))
    write_text_atomic(root / TUNED, text)


def read_tuned(root: Path) -> dict[str, Tuned]:
    """A folder's tuned.toml ({} where it has none); UsageError, in one line, for one that is
    not what the runner writes."""
    path = Path(root) / TUNED
    try:
        data = tomllib.loads(read_file(path, MAX_TUNED_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:       # too large, a link, bad UTF-8 or bad TOML
        raise UsageError(f"{path}: not a tuning result ({exc})") from None
    cells = data.get("cells")
    if not isinstance(cells, dict):
        raise UsageError(f"{path}: not a tuning result (no [cells] table)")
    return {name: _entry(path, name, row) for name, row in cells.items()}


def _entry(path: Path, name: str, row: Any) -> Tuned:
    scalars = (str, int, float, bool)
    if not isinstance(row, dict) or not isinstance(row.get("knobs", {}), dict) or \
            not all(isinstance(v, scalars) for v in row.get("knobs", {}).values()) or \
            not isinstance(row.get("gpu"), str) or row.get("status", TUNED_STATUS) not in STATUSES:
        raise UsageError(f"{path}: cells.{name!r}: not a tuning entry (gpu, stack, knobs, "
                         "status)")
    known = set(Tuned.__dataclass_fields__) - {"cell", "source"}
    try:
        return Tuned(cell=name, source=str(path.parent),
                     **{k: v for k, v in row.items() if k in known})
    except TypeError as exc:
        raise UsageError(f"{path}: cells.{name!r}: {exc}") from None


def tuning_folders(results_dir: Path, name: str) -> list[Path]:
    """The matrix's tuning folders, newest first (their names are timestamps)."""
    root = tuning_root(results_dir, name)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                   and (p / TUNED).is_file()), key=lambda p: p.name, reverse=True)


def write_probes(root: Path, cell_id: str, probes: Sequence[Mapping[str, Any]]) -> Path:
    """A cell's probes.jsonl, every probe so far (rewritten whole, atomically, after each)."""
    path = cell_folder(root, cell_id) / PROBES
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(json.dumps(p, sort_keys=True) + "\n" for p in probes))
    return path


def read_probes(root: Path, cell_id: str) -> list[dict[str, Any]]:
    path = cell_folder(root, cell_id) / PROBES
    try:
        text = read_file(path).decode("utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
