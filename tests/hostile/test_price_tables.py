"""Price tables and SkyPilot catalogs as hostile input: a regular file only (a device or a FIFO
is refused, never read or waited on), its size checked before it is read and its rows capped
while they are read; `prices import` refuses a count that is not finite or beyond [cost]'s, a
field over csv's limit and a date in the future in one line, exit 2, and writes no cell a
spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import datetime
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.paths import REPO_ROOT
from tests.hostile.helpers import at_most_1_gb_of_memory
from tests.hostile.test_hostile_runs import hostile_matrix, main, one_line

VMS_HEADER = "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,Region,Price," \
             "SpotPrice\n"


def runner(*args: object, timeout: int = 120) -> subprocess.CompletedProcess:
    """The runner in a process of its own, allowed 1 GB (before: /dev/zero grew until the
    kernel killed it, a FIFO hung, a million-row catalog took 1.7 GB)."""
    return subprocess.run([sys.executable, "-m", "runner", *map(str, args)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=at_most_1_gb_of_memory)


def one_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, \
        (done.returncode, done.stderr[-2000:])
    return lines[0]


def cost_matrix(tmp_path: Path, table: Path) -> Path:
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(1.0, tables={"cost": {"accelerator": "A100",
                                                           "price_table": str(table)}}))
    return matrix


def test_a_device_as_price_table_is_refused_unread(tmp_path):
    line = one_error(runner("plan", cost_matrix(tmp_path, Path("/dev/zero"))))
    assert line.endswith("cost.price_table: /dev/zero: not a regular file (a device, a FIFO or "
                         "a socket), not a price table"), line


def test_a_fifo_as_price_table_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "prices.csv"
    os.mkfifo(fifo)
    line = one_error(runner("plan", cost_matrix(tmp_path, fifo), timeout=60))
    assert line.endswith(f"cost.price_table: {fifo}: not a regular file (a device, a FIFO or "
                         "a socket), not a price table"), line


def catalog(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "catalog" / "v8"
    (folder / "aws").mkdir(parents=True)
    (folder / "aws" / "vms.csv").write_text(VMS_HEADER + body)
    return folder


def test_a_million_row_catalog_is_refused_at_its_row_cap_while_read(tmp_path):
    folder = tmp_path / "catalog" / "v8"
    (folder / "aws").mkdir(parents=True)
    with (folder / "aws" / "vms.csv").open("w") as vms:        # 30 MB, under the size limit
        vms.write(VMS_HEADER)
        vms.writelines(f"p{n},8,61,V100,1,r{n},3.06,\n" for n in range(1_000_000))
    line = one_error(runner("prices", "import", folder, "-o", tmp_path / "out.csv"))
    assert line == f"error: {folder / 'aws' / 'vms.csv'}: more than 200000 rows", line
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("count", ["1e400", "inf", "-inf", "2000"])
def test_prices_import_refuses_a_count_beyond_any_vm(count, tmp_path, capsys):
    folder = catalog(tmp_path, f"p4d,96,1152,A100,{count},us-east-1,32.77,\n")
    line = one_line(*main(capsys, "prices", "import", folder, "-o", tmp_path / "o.csv")[::2])
    assert line == f"error: {folder / 'aws' / 'vms.csv'}: row 2: AcceleratorCount: " \
                   f"{count!r} is not a number of GPUs from 0 to 1024", line
    assert not (tmp_path / "o.csv").exists()


def test_prices_import_refuses_a_field_over_the_csv_limit(tmp_path, capsys):
    folder = catalog(tmp_path, f"p4d,96,1152,A100,8,us-east-1,32.77,\"{'x' * 200_000}\"\n")
    line = one_line(*main(capsys, "prices", "import", folder, "-o", tmp_path / "o.csv")[::2])
    assert line == f"error: {folder / 'aws' / 'vms.csv'}: row 2: field larger than field " \
                   "limit (131072)", line


def test_a_price_table_with_a_field_over_the_csv_limit_is_one_line(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,Region,"
                     "Price,SpotPrice,Provider,RetrievedAt,Source\n"
                     f"x,1,1,A100,1,r,1,,aws,2026-11-01,\"{'s' * 200_000}\"\n")
    line = one_line(*main(capsys, "prices", "check", table)[::2])
    assert line == f"error: {table}: row 2: field larger than field limit (131072)", line


def test_prices_import_refuses_a_date_in_the_future(tmp_path, capsys):
    folder = catalog(tmp_path, "p4d,96,1152,A100,8,us-east-1,32.77,\n")
    tomorrow = (datetime.date.today() + datetime.timedelta(days=1)).isoformat()
    line = one_line(*main(capsys, "prices", "import", folder, "--date", tomorrow, "-o",
                          tmp_path / "o.csv")[::2])
    assert line.endswith(f"--date: {tomorrow} is in the future (the day the catalog was "
                         "retrieved: today or before)"), line


def test_prices_import_writes_no_cell_a_spreadsheet_runs(tmp_path, capsys):
    formulas = ["=HYPERLINK(\"http://x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]
    body = io.StringIO()
    csv.writer(body, lineterminator="\n").writerows(
        [f, 96, 1152, "A100", 8, f, 32.77, ""] for f in formulas)
    folder = catalog(tmp_path, body.getvalue())
    code, out, err = main(capsys, "prices", "import", folder, "-o", tmp_path / "o.csv")
    assert code == 0, out + err
    with (tmp_path / "o.csv").open(newline="") as table:
        cells = [cell for row in csv.reader(table) for cell in row]
    assert not [c for c in cells if c[:1] in "=+@" and c] and \
        not [c for c in cells if c.startswith("-")], cells
    assert {f"'{f}" for f in formulas} <= set(cells)
    assert main(capsys, "prices", "check", tmp_path / "o.csv")[0] == 0
