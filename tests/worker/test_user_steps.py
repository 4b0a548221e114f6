"""A user's step function that returns a host copy (`loss.cpu()`, issue 49 item 9): it passes the
runner's type check (it is an array), but on a GPU every call then waits for the device, so the
record says so in effective.step_output. The framework checks that need a GPU are the pure rule
here; on a CPU nothing is a copy (host memory is the device's)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from runner.worker.apis import user_common


def test_a_step_that_returns_a_host_copy_on_a_gpu_is_said_to():
    note = user_common.host_copy_note("gpu", [True, True])
    assert note is not None and "one synchronisation per call" in note
    assert user_common.host_copy_note("gpu", [True, False]) is None    # a device array too
    assert user_common.host_copy_note("cpu", [True]) is None           # the CPU is the device
    assert user_common.host_copy_note("gpu", []) is None


def test_the_sync_check_records_it_in_effective():
    """The check on the first call's output fills the bench's effective: a NumPy step on a
    device named "gpu" stands for a copy (what torch's `.cpu()` returns there)."""
    spec = SimpleNamespace(api="numpy", backend=None)
    fw = SimpleNamespace(device="gpu", sync=lambda out: None, on_host=lambda leaf: True,
                         is_array=lambda leaf: isinstance(leaf, np.ndarray))
    effective: dict = {}
    user_common.checked_sync(fw, spec, "numpy_run", effective)(np.ones(3))
    assert effective["step_output"].startswith("a host copy")
    fw.device, effective = "cpu", {}
    user_common.checked_sync(fw, spec, "numpy_run", effective)(np.ones(3))
    assert "step_output" not in effective
