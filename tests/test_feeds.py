"""What the timed calls do besides the step, checked in the real environments (CPU): no host to
device copy per step in the torch CNN's on-device data path, Keras fit timed without touching its
batch-end dispatch, Keras 2 fed without an iterator built per call.

Each test runs a short script in an environment's own interpreter (the cached local environments,
as tests/test_async_timing.py does): the worker code is imported there and driven directly."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from runner.environments import venvs

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

# A spec for build(spec, fw): the tiny CNN (1 024 samples) at batch 64, 16 steps per epoch.
SPEC = """
from runner.worker.protocol import CellSpec

def spec(api, backend=None, **axes):
    values = dict(run_id="t", cell_id="c", cell_name="cnn", repeat=1, environment="e", api=api,
                  backend=backend, image=None, workload="cnn", task="fit", batch_size=64,
                  precision="float32", jit="auto", size="tiny", tf32=None, steps_per_execution=1,
                  data="device", device="cpu", options={"samples": 1024}, steps=40,
                  warmup_steps=1, seed=0, result_path="")
    values.update(axes)
    return CellSpec(**values)
"""


def run_script(image: str, body: str, tmp_path: Path, **env: str) -> dict:
    """Run SPEC + body in the environment of `image`; the body prints one JSON object last."""
    python = venvs.build(image).python
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SPEC) + textwrap.dedent(body), encoding="utf-8")
    done = subprocess.run([str(python), "-P", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
                               "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torch_device_data_copies_indices_once_per_epoch_not_per_step(tmp_path):
    """A `.to(device)` per step from pageable host memory is a blocking copy that synchronises
    the stream (the old index path): every device-targeted `.to` during the timed loop is
    counted, against the epochs the loop runs through."""
    out = run_script("torch", """
        import json, torch
        from runner.worker.apis.torch_api import Framework
        from runner.worker.apis.torch_api import cnn
        from runner.worker.bench import StepClock, run_loop

        fw = Framework(spec("torch"))
        bench = cnn.build(spec("torch"), fw)
        moves = []
        original = torch.Tensor.to

        def counting_to(self, *args, **kwargs):
            targets = list(args) + list(kwargs.values())
            if any(isinstance(a, (torch.device, str)) for a in targets):
                moves.append(tuple(self.shape))
            return original(self, *args, **kwargs)

        torch.Tensor.to = counting_to
        clock = StepClock(warmup_calls=1, timed_calls=40, sync=fw.sync)
        clock.calibrate = lambda: 4
        run_loop(bench, clock)
        torch.Tensor.to = original
        print(json.dumps({"moves": moves, "calls": clock.calls,
                          "data": bench.effective["data"]}))
    """, tmp_path)
    epochs = -(-out["calls"] // 16)                  # 41 steps: 3 epochs of 16 steps
    # One copy of a whole epoch's (16, 64) index array per epoch, none per step.
    assert out["moves"] == [[16, 64]] * epochs, out["moves"]
    assert out["calls"] == 41 and "once per epoch" in out["data"]
