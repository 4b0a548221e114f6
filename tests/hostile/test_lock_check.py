"""`lock --check` reads the whole lock: a tampered hash (one or all of a pin's), an environment
marker and an option line (`--find-links`) are each named against a fresh resolution of the
`.in`, and a re-lock makes the lock what the index serves again. Asks PyPI (skipped where it
cannot be reached)."""

from __future__ import annotations

import re
import shutil

import pytest

from runner.environments import locking
from runner.paths import IMAGES_DIR
# The selftest matrix and CLI helpers, and the autouse check that no process is left behind.
from tests.hostile.test_hostile_runs import main
from tests.hostile.test_hostile_runs import no_process_left_behind  # noqa: F401


FAKE_HASH = "sha256:" + "0" * 62 + "aa"


NUMPY_HASH = re.compile(r"(?<=--hash=)sha256:[0-9a-f]{64}")


def tamper_numpy_lock(text: str, how: str) -> str:
    numpy_entry = text[text.index("numpy=="):text.index("# via", text.index("numpy=="))]
    if how == "one hash":
        tampered = NUMPY_HASH.sub(FAKE_HASH, numpy_entry, count=1)
    elif how == "every hash":
        tampered = NUMPY_HASH.sub(FAKE_HASH, numpy_entry)
    elif how == "a marker":
        tampered = numpy_entry.replace(
            " \\", " ; sys_platform == 'win32' \\", 1)
    else:                                   # a place for files that the .in does not name
        return "--find-links https://mirror.invalid/wheels\n" + text
    return text.replace(numpy_entry, tampered)


@pytest.mark.parametrize("how, said", [
    ("one hash", "numpy 2.4.6: 1 hash(es) not of a file the index serves for it, first "
                 "sha256:0000000000000000… (and 1 file(s) it serves are not pinned)"),
    ("every hash", "numpy 2.4.6: 1 hash(es) not of a file the index serves for it, first "
                   "sha256:0000000000000000… (and 72 file(s) it serves are not pinned)"),
    ("a marker", "numpy 2.4.6: pinned as 'numpy==2.4.6; sys_platform == \"win32\"', resolves "
                 "to 'numpy==2.4.6'"),
    ("find-links", "options ['--find-links https://mirror.invalid/wheels'] → none"),
])
def test_lock_check_compares_hashes_markers_and_indexes_with_a_fresh_resolution(
        how, said, pypi, tmp_path, monkeypatch, capsys):
    images = tmp_path / "images"
    shutil.copytree(IMAGES_DIR / "numpy", images / "numpy")
    lock = images / "numpy" / "requirements.lock"
    shipped = lock.read_text()
    assert "numpy==2.4.6 \\" in shipped                 # the shipped pin the messages name
    lock.write_text(tamper_numpy_lock(shipped, how))
    monkeypatch.setattr(locking, "IMAGES_DIR", images)
    code, out, err = main(capsys, "lock", "--check", "numpy")
    assert code == 1, out + err
    assert "images/numpy/requirements.lock differs from what requirements.in resolves to: " \
           f"{said} (" in " ".join(out.split())
    # Re-locked, the lock is what the index serves again: no hash of the tampered one survives.
    code, out, err = main(capsys, "lock", "numpy")
    assert code == 0 and lock.read_text() == shipped, out + err
    assert main(capsys, "lock", "--check", "numpy")[0] == 0
