"""Links inside a run folder: no folder the runner writes into may be a symbolic link (refused in
one line, exit 2, nothing written through it), and no file it creates is opened through one (a
temporary file of its own making, or the link removed first). `profile RUN` used to write a
profile through a linked `profiles/<cell>/` and through a linked `.trace.json.gz.tmp`. The cells
run in this interpreter (NumPy's selftest, profiled by cProfile), so nothing is built."""

from __future__ import annotations

import json
from pathlib import Path

from runner.executors.base import note_in_log
from tests.hostile.test_hostile_runs import main, no_process_left_behind  # noqa: F401


def cell_id(run: Path) -> str:
    return json.loads((run / "manifest.json").read_text())["cells"][0]["id"]


def test_profile_refuses_a_linked_cell_folder_and_writes_nothing_through_it(
        run_copy, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (run_copy / "profiles").mkdir()
    (run_copy / "profiles" / cell_id(run_copy)).symlink_to(outside)
    code, out, err = main(capsys, "profile", run_copy)
    assert code == 2 and err.strip() == (
        f"error: {run_copy / 'profiles' / cell_id(run_copy)}: is a symbolic link; a run folder "
        "holds none (it could point anywhere)"), out + err
    assert list(outside.iterdir()) == []


def test_profile_never_writes_through_a_linked_temporary_file(run_copy, tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.write_text("kept\n")
    folder = run_copy / "profiles" / cell_id(run_copy)
    folder.mkdir(parents=True)
    (folder / ".trace.json.gz.tmp").symlink_to(precious)
    code, out, err = main(capsys, "profile", run_copy)
    assert code == 0, out + err
    assert precious.read_text() == "kept\n"
    trace = folder / "trace.json.gz"
    assert trace.is_file() and not trace.is_symlink() and trace.read_bytes()[:2] == b"\x1f\x8b"


def test_a_note_in_a_linked_log_is_never_written_through_it(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("kept\n")
    log = tmp_path / "logs" / "c-r1.log"
    log.parent.mkdir()
    log.symlink_to(precious)
    note_in_log(log, "env X of the matrix ignored")
    assert precious.read_text() == "kept\n"
    assert not log.is_symlink() and log.read_text() == "[runner: env X of the matrix ignored]\n"
