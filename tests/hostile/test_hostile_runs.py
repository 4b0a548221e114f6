"""Hostile run folders, archives, workers and disks: crafted run folders (truncated, list-shaped
or foreign records and manifests, symbolic links), crafted archives, a worker that lies, two
runs racing for one folder, a full disk. Each ends in one line and the documented exit code,
writes nothing it should not, and leaves no process behind. The cells run in this interpreter
(`python = sys.executable`, the NumPy of the runner's own environment), so nothing is built."""

from __future__ import annotations

import base64
import errno
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from runner import cli
from runner.environments import transfer
from runner.paths import REPO_ROOT as REPO
from runner.results.data.store import Store
from runner.results.render import html
from runner.worker import protocol
from tests.matrices import matrix_text, this_interpreter

HOST_PYTHON = sys.executable

SLEEPS_MS = [1.0, 2.0]


def hostile_matrix(sleep_ms: Any = SLEEPS_MS, *, python: str = HOST_PYTHON,
                   options: dict[str, Any] | None = None,
                   environments: dict[str, dict] | None = None, benchmarks: list[dict] | None = None,
                   tables: dict[str, Any] | None = None, **run_settings: Any) -> str:
    """Selftest cells sleeping `sleep_ms` on `python` (the host's interpreter), with more
    `options`, and any more `environments`, `benchmarks` and top-level `tables`."""
    run = {"repeats": 2, "steps": 3, "timeout": 60, **run_settings}
    return matrix_text("hostile", **run, tables=tables,
                       environments={"host": this_interpreter(python=python),
                                     **(environments or {})},
                       benchmarks=[{"workload": "selftest", "environments": ["host"],
                                    "options": {"behaviour": "ok", "sleep_ms": sleep_ms,
                                                **(options or {})}},
                                   *(benchmarks or [])])


MATRIX = hostile_matrix()


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """This test's own leftovers only: one an earlier test in this pytest worker left (its
    defect, reported there) must not fail this one."""
    earlier = {child.pid for child in psutil.Process().children(recursive=True)}

    def left() -> list[psutil.Process]:
        return [child for child in psutil.Process().children(recursive=True)
                if child.pid not in earlier]

    yield
    deadline = time.monotonic() + 10
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left() == []


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str, expected_code: int = 2) -> str:
    lines = err.strip().splitlines()
    assert code == expected_code and len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def records(run_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")}


# --- paths, folders, locks -------------------------------------------------------------------

def test_a_relative_results_dir_works_for_local_cells(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("matrix.toml").write_text(hostile_matrix(1.0, repeats=1))
    code, out, err = main(capsys, "matrix.toml", "--results-dir", "rd")
    assert code == 0, out + err
    (run,) = Path("rd/hostile").iterdir()
    (record,) = records(run).values()
    assert record["status"] == "ok" and len(record["samples_ms"]) == 3


CREATE = """
import sys, time
from pathlib import Path
from runner.results.data.store import Store
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
for _ in range(3):
    print(Store.create("same", Path(sys.argv[1])).root, flush=True)
"""


def test_runs_started_in_the_same_second_never_share_a_folder(tmp_path):
    start = time.time() + 2.0
    processes = [subprocess.Popen([sys.executable, "-c", CREATE, str(tmp_path), str(start)],
                                  cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(8)]
    roots = [line for p in processes for line in p.communicate(timeout=60)[0].split()]
    assert len(roots) == 24 and len(set(roots)) == 24
    assert len(list((tmp_path / "same").iterdir())) == 24


def test_a_second_run_of_a_locked_folder_refuses_in_one_line(run_copy, tmp_path, capsys):
    holder = Store.open(run_copy)
    try:
        code, _, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
        line = one_line(code, err)
        assert line == (f"error: {run_copy}: in use by another run (pid {os.getpid()}); one run "
                        f"at a time per run folder")
    finally:
        holder.close()
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err


def test_latest_orders_the_tenth_run_of_a_second_after_the_ninth(tmp_path):
    for name in ("20261123T000000Z", "20261123T000000Z-2", "20261123T000000Z-9",
                 "20261123T000000Z-10", "20261122T235959Z-11"):
        (tmp_path / "x" / name).mkdir(parents=True)
        (tmp_path / "x" / name / "manifest.json").write_text("{}")
    assert Store.latest("x", tmp_path).name == "20261123T000000Z-10"


# --- resume --------------------------------------------------------------------------------

def test_resume_sets_aside_unusable_records_and_measures_their_cells_again(run_copy, tmp_path,
                                                                          capsys):
    cells = sorted((run_copy / "cells").glob("*.json"))
    assert len(cells) == 4
    truncated, listed, foreign, moved = cells
    truncated.write_text(truncated.read_text()[:100])
    listed.write_text("[1, 2]")
    other = json.loads(foreign.read_text())
    foreign.write_text(json.dumps({**other, "schema": 2}))
    outside = tmp_path / "outside.json"
    outside.write_text(moved.read_text())
    moved.unlink()
    moved.symlink_to(outside)                   # a link in cells/: never followed
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, out + err
    said = " ".join(out.split())
    for path, why in ((truncated, "not valid JSON"), (listed, "expected a JSON object, got list"),
                      (foreign, "schema: 2 is not one of 1"),
                      (moved, "is a symbolic link")):
        assert f"set aside {path.name} ({why}" in said
        assert (run_copy / "set-aside" / path.name).exists() or \
            (run_copy / "set-aside" / path.name).is_symlink()
    after = records(run_copy)
    assert len(after) == 4 and all(r["status"] == "ok" for r in after.values())
    assert outside.read_text() == (run_copy / "set-aside" / moved.name).read_text()
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)   # not stuck
    assert code == 0 and "0 runs to do" not in err and "set aside" not in out


def test_resume_refuses_another_matrix_and_never_rewrites_the_runs_copy(run_copy, tmp_path,
                                                                        capsys):
    kept = (run_copy / "matrix.toml").read_bytes()
    changed = tmp_path / "changed.toml"
    changed.write_text(hostile_matrix(steps=500))
    before = set(os.listdir(run_copy / "cells"))
    code, _, err = main(capsys, changed, "--resume", run_copy)
    line = one_line(code, err)
    assert f"{changed} is not the matrix this run was started with (run.steps: 3 → 500)" in line
    assert set(os.listdir(run_copy / "cells")) == before
    assert (run_copy / "matrix.toml").read_bytes() == kept
    more = tmp_path / "more.toml"                 # more repeats of the same cells: allowed
    more.write_text(hostile_matrix(repeats=3))
    code, out, err = main(capsys, more, "--resume", run_copy)
    assert code == 0, err
    assert "resuming with run.repeats: 2 → 3" in out and len(records(run_copy)) == 6
    assert (run_copy / "matrix.toml").read_bytes() == kept


def test_a_run_from_before_the_digest_is_compared_by_its_matrix_toml(run_copy, tmp_path,
                                                                    capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    del manifest["matrix_sha256"]
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    changed = tmp_path / "changed.toml"
    changed.write_text(hostile_matrix([1.0, 3.0]))
    line = one_line(*main(capsys, changed, "--resume", run_copy)[::2])
    assert "(benchmarks[0].options.sleep_ms[1]: 2.0 → 3.0)" in line
    code, _, err = main(capsys, tmp_path / "matrix.toml", "--resume", run_copy)
    assert code == 0, err


# --- the host keeps its coordinates and its statuses ----------------------------------------

FAKE_WORKER = """
import json, sys
spec = json.load(open(sys.argv[1]))
samples = {1.0: [], 2.0: [0.0, 0.0], 3.0: "x"}[spec["options"]["sleep_ms"]]
json.dump({"schema": 1, "status": "ok", "samples_ms": samples, "cell_id": "evil",
           "repeat": 99, "environment": "x[/b]"}, open(sys.argv[2], "w"))
"""


def test_a_lying_worker_never_aborts_the_run_nor_moves_its_cell(tmp_path, capsys):
    fake = tmp_path / "fake_worker.py"
    fake.write_text(FAKE_WORKER)
    interpreter = tmp_path / "liar"
    interpreter.write_text(f'#!/bin/sh\nif [ "$2" = "runner.worker" ]; then exec {HOST_PYTHON} '
                           f'{fake} "$3" "$4"; fi\nexec {HOST_PYTHON} "$@"\n')
    interpreter.chmod(0o755)
    matrix = tmp_path / "m.toml"
    matrix.write_text(hostile_matrix(
        repeats=1, environments={"liar": {"python": str(interpreter), "api": "numpy"}},
        benchmarks=[{"workload": "selftest", "environments": ["liar"],
                     "options": {"behaviour": "ok", "sleep_ms": [1.0, 2.0, 3.0]}}]))
    code, out, err = main(capsys, matrix, "--results-dir", tmp_path / "r")
    assert code == 1, out + err                   # failed cells; the run went on to the end
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    by_sleep = {(r["environment"], r["options"]["sleep_ms"]): (key, r)
                for key, r in records(run).items()}
    assert len(by_sleep) == 5
    for sleep in (1.0, 2.0):
        key, record = by_sleep[("liar", sleep)]
        assert record["status"] == "failed" and "no finite positive step times" in record["error"]
        assert key == f"{record['cell_id']}-r1" and record["repeat"] == 1
    key, record = by_sleep[("liar", 3.0)]
    assert record["status"] == "crashed"
    assert "not a valid result (samples_ms: expected a list, got str 'x')" in record["error"]
    assert all(by_sleep[("host", s)][1]["status"] == "ok" for s in (1.0, 2.0))
    assert "report:" in out


# --- report and compare on crafted folders ---------------------------------------------------

def test_report_and_compare_name_the_records_they_cannot_read(run_copy, finished_run, capsys):
    truncated, listed = sorted((run_copy / "cells").glob("*.json"))[:2]
    truncated.write_text(truncated.read_text()[:50])
    listed.write_text("[]")
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0
    warned = err.strip().splitlines()
    assert warned == [f"warning: {truncated}: not valid JSON (Unterminated string starting at: "
                      f"line 1 column 42 (char 41)); not in the reports"
                      if "Unterminated" in warned[0] else warned[0],
                      f"warning: {listed}: expected a JSON object, got list; not in the reports"]
    assert str(truncated) in warned[0]
    code, out, err = main(capsys, "compare", finished_run, run_copy, "--markdown",
                          run_copy.parent / "c.md")
    assert code in (0, 1) and "Traceback" not in err
    assert f"{listed}: expected a JSON object, got list; not compared" in err


@pytest.mark.parametrize("manifest, fragment", [
    ('{"schema": 1, "name": "hostile", "cel', "manifest.json: not valid JSON"),
    ("[1, 2, 3]", "manifest.json: expected a JSON object, got list"),
    ('{"schema": 1, "name": "hostile", "cells": {"id": 1}}', "manifest.json: cells: expected a list"),
])
def test_report_and_compare_refuse_a_broken_manifest(manifest, fragment, run_copy,
                                                     finished_run, capsys):
    (run_copy / "manifest.json").write_text(manifest)
    before = sorted(os.listdir(run_copy))
    assert fragment in one_line(*main(capsys, "report", run_copy)[::2])
    assert fragment in one_line(*main(capsys, "compare", finished_run, run_copy)[::2])
    assert sorted(os.listdir(run_copy)) == before


def test_compare_with_all_zero_samples_names_them_instead_of_a_math_error(run_copy,
                                                                          finished_run, capsys):
    for path in (run_copy / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["samples_ms"] = [0.0] * len(record["samples_ms"])
        path.write_text(json.dumps(record))
    code, out, err = main(capsys, "compare", finished_run, run_copy, "--markdown",
                          run_copy.parent / "c.md")
    assert code == 0 and "Traceback" not in err
    assert err.count("status 'ok' without finite positive samples_ms; not compared") == 4


def test_reproduce_refuses_a_flavour_that_is_not_cpu_or_cuda(run_copy, tmp_path, capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    (run_copy / "manifest.json").write_text(json.dumps({**manifest, "flavour": "rocm"}))
    code, _, err = main(capsys, "reproduce", run_copy, "--results-dir", tmp_path / "new")
    assert "manifest.json: flavour: 'rocm' is not one of 'cpu', 'cuda' or 'node'" in one_line(code, err)
    assert not (tmp_path / "new").exists()


def test_a_crafted_name_or_link_never_embeds_a_host_file_in_the_report(run_copy, tmp_path,
                                                                       capsys):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG top secret")
    first = sorted((run_copy / "cells").glob("*.json"))[0]
    record = json.loads(first.read_text())
    record["environment"] = f"x\n\n![s]({secret})\n"
    first.write_text(json.dumps(record))
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and "environment: 'x\\n\\n![s]" in err
    (run_copy / "plots" / "link.png").symlink_to(secret)
    (run_copy / "plots" / "own.png").write_bytes(b"\x89PNG a plot")
    page = html.markdown_to_html(f"![a]({secret})\n\n![b](plots/../../../{secret.name})\n\n"
                                 "![c](plots/link.png)\n\n![d](plots/own.png)", run_copy)
    assert base64.b64encode(secret.read_bytes()).decode() not in page
    assert page.count('class="missing"') == 3
    assert base64.b64encode(b"\x89PNG a plot").decode() in page
    assert base64.b64encode(b"\x89PNG top secret").decode() not in \
        (run_copy / "report.html").read_text()


def test_a_run_folder_with_a_link_is_refused_and_nothing_is_written_through(run_copy, tmp_path,
                                                                             capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(run_copy / "plots")
    (run_copy / "plots").symlink_to(outside)
    for argv in (("report", run_copy), (tmp_path / "matrix.toml", "--resume", run_copy)):
        line = one_line(*main(capsys, *argv)[::2])
        assert line.endswith(f"{run_copy / 'plots'}: is a symbolic link; a run folder holds none "
                             "(it could point anywhere)")
    assert list(outside.iterdir()) == []


# --- a full disk -----------------------------------------------------------------------------

def test_too_little_free_disk_stops_before_a_cell_with_the_resume_command(tmp_path, capsys,
                                                                          monkeypatch):
    (tmp_path / "matrix.toml").write_text(MATRIX)
    monkeypatch.setenv("DL_BENCH_MIN_FREE_MB", str(10**12))
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--results-dir", tmp_path / "r")
    line = one_line(code, err)
    (run,) = (tmp_path / "r" / "hostile").iterdir()
    assert "run stopped: " in line and "below 1000000000000 MB (DL_BENCH_MIN_FREE_MB)" in line
    assert line.endswith(f" -m runner {tmp_path / 'matrix.toml'} --resume {run} --executor local")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["finished_at"] and "DL_BENCH_MIN_FREE_MB" in manifest["stopped"]
    assert records(run) == {} and not (run / ".reserve").exists()
    monkeypatch.delenv("DL_BENCH_MIN_FREE_MB")
    code, out, err = main(capsys, tmp_path / "matrix.toml", "--resume", run)
    assert code == 0, err
    assert len(records(run)) == 4


FILL = """
set -e
mount -t tmpfs -o size=12m tmpfs "$1"
cp "$2" "$1/matrix.toml"
# Leave about 40 kB beside the run's 8 MB reserve: a few cells fit, then the disk is full.
fallocate -l $(( $(stat -f -c '%a*%S' "$1") - 8*1024*1024 - 40*1024 )) "$1/filler"
DL_BENCH_MIN_FREE_MB=0 "$3" -m runner "$1/matrix.toml" --results-dir "$1/r" \\
    >"$1/../out.txt" 2>"$1/../err.txt" || echo "exit $?" >"$1/../code.txt"
cp -r "$1/r" "$1/../kept"
rm "$1/filler"
DL_BENCH_MIN_FREE_MB=0 "$3" -m runner "$1/matrix.toml" --results-dir "$1/r" --resume \\
    >"$1/../resumed.txt" 2>&1 \\
    || echo "exit $?" >>"$1/../resumed.txt"
cp -r "$1/r" "$1/../final"
"""


@pytest.mark.slow          # two runner processes on a real (tiny) disk: about 10 s
def test_a_full_disk_stops_the_run_in_one_line_and_finalises_its_manifest(tmp_path):
    """A real ENOSPC: a 12 MB tmpfs in a mount namespace of its own, nearly filled."""
    if shutil.which("unshare") is None or shutil.which("fallocate") is None:
        pytest.skip("needs unshare and fallocate (util-linux)")
    many = [float(i) for i in range(1, 9)]
    (tmp_path / "m.toml").write_text(hostile_matrix(many, repeats=1))
    (tmp_path / "disk").mkdir()
    script = tmp_path / "fill.sh"
    script.write_text(FILL)
    done = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", str(script),
                           str(tmp_path / "disk"), str(tmp_path / "m.toml"), HOST_PYTHON],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no tmpfs in a mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    err = (tmp_path / "err.txt").read_text().strip().splitlines()
    assert (tmp_path / "code.txt").read_text().strip() == "exit 2"
    assert len(err) == 1 and "No space left on device" in err[0] and "--resume" in err[0]
    (run,) = (tmp_path / "kept" / "hostile").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["finished_at"] and "No space left on device" in manifest["stopped"]
    kept = records(run)
    assert 0 < len(kept) < 8 and all(r["status"] == "ok" for r in kept.values())
    (final,) = (tmp_path / "final" / "hostile").iterdir()
    resumed = records(final)
    assert len(resumed) == 8 and all(r["status"] == "ok" for r in resumed.values()), \
        (tmp_path / "resumed.txt").read_text()
    assert all(resumed[k] == v for k, v in kept.items())      # nothing finished was lost


# --- archives --------------------------------------------------------------------------------

def archive_with(tmp_path: Path, index: bytes | None, members: dict[str, bytes] | None = None,
                 index_is_folder: bool = False) -> Path:
    path = tmp_path / "images.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (members or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if index_is_folder:
            info = tarfile.TarInfo(transfer.INDEX)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        elif index is not None:
            info = tarfile.TarInfo(transfer.INDEX)
            info.size = len(index)
            tar.addfile(info, io.BytesIO(index))
    transfer.checksum_path(path).write_text(f"{transfer.sha256_of(path)}  {path.name}\n")
    return path


GOOD_ENTRY = {"key": "numpy", "file": "images/1.tar", "image_id": "sha256:" + "a" * 64,
              "tags": [], "sha256": "b" * 64, "labels": {}}


@pytest.mark.parametrize("index, members, folder, fragment", [
    (b"[1]", {}, False, "index.json is not a JSON object"),
    (b'{"schema": 2, "images": []}', {}, False, "schema: 2 is not one of 1"),
    (b'{"schema": 1}', {}, False, "images: missing required key"),
    (json.dumps({"schema": 1, "images": [{**GOOD_ENTRY, "file": "../../etc/passwd"}]}).encode(),
     {}, False, "images[0].file: '../../etc/passwd' must be"),
    (json.dumps({"schema": 1, "images": [GOOD_ENTRY]}).encode(), {}, False,
     "names images/1.tar, which the archive does not hold"),
    (b"{" * 100_000, {}, False, "not an archive of runner export"),
    (None, {"images/1.tar": b"x"}, False, "not an archive of runner export (no index.json)"),
    (None, {}, True, "index.json is not a file"),
], ids=["list", "schema", "no-images", "path", "missing-member", "deep", "no-index", "folder"])
def test_import_refuses_a_malformed_archive_before_the_engine(index, members, folder, fragment,
                                                              tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    archive = archive_with(tmp_path, index, members, folder)
    line = one_line(*main(capsys, "import", archive)[::2])
    assert str(archive) in line and fragment in line and "Docker" not in line


def test_import_refuses_a_checksum_file_that_is_not_text(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    archive = archive_with(tmp_path, json.dumps({"schema": 1, "images": [GOOD_ENTRY]}).encode(),
                           {"images/1.tar": b"x"})
    transfer.checksum_path(archive).write_bytes(b"\xff\xfe" + b"\x00" * 64)
    line = one_line(*main(capsys, "import", archive)[::2])
    assert f"{transfer.checksum_path(archive)}: not a checksum file" in line


# --- the atomic writer -------------------------------------------------------------------------

def test_the_atomic_writer_syncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:                      # records what was synced, then syncs it
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    protocol.write_json_atomic(tmp_path / "r.json", {"v": 1})
    assert synced[-1] == str(tmp_path)             # the folder, after the file's own sync
    assert synced[0].startswith(str(tmp_path / ".r.json."))


def test_a_fifo_in_place_of_a_record_is_named_not_waited_on(run_copy, capsys):
    first = sorted((run_copy / "cells").glob("*.json"))[0]
    first.unlink()
    os.mkfifo(first)
    code, out, err = main(capsys, "report", run_copy)
    assert code == 0 and f"{first}: not a regular file" in err


def test_errno_of_a_link_is_named(tmp_path):
    from runner.results.data.store import describe_os_error

    assert "symbolic link" in describe_os_error(OSError(errno.ELOOP, "x"))
