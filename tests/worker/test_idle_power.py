"""The device's power at rest is read before the framework is imported (issue 59 item 11): read
after, a framework's context at rest drew power of its own (H200: JAX 122 W, torch 80 W, nothing
running 79.8 W), and a JAX cell's energy above idle sat ~42 W × its window below torch's for the
same draw. No GPU here: NVML is a fake handle that notes when it is read, and the framework
(NumPy's, for the selftest) is told it computes on a GPU."""

from __future__ import annotations

import importlib

from runner.worker import __main__ as worker
from runner.worker.apis import numpy_api
from runner.worker.protocol import CellSpec, empty_result


class RestingGpu:
    def __init__(self, events: list[str]):
        self.events = events

    def idle(self) -> dict[str, float]:
        self.events.append("idle")
        return {"gpu_idle_power_w": 79.8, "gpu_energy_resolution_s": 0.02}

    def metadata(self) -> dict[str, str]:
        return {"gpu_name": "NVIDIA H200"}


def test_the_power_at_rest_is_read_before_the_framework_is_imported(monkeypatch, tmp_path):
    events: list[str] = []
    imported = importlib.import_module

    def import_module(name: str, *args):
        events.append(f"import {name.rsplit('.', 1)[-1]}")
        return imported(name, *args)

    monkeypatch.setattr(worker.Nvml, "open", classmethod(lambda cls, pin=None: RestingGpu(events)))
    monkeypatch.setattr(worker.importlib, "import_module", import_module)
    made = numpy_api.Framework.__init__

    def on_a_gpu(self, spec):
        made(self, spec)
        self.device = "gpu"

    monkeypatch.setattr(numpy_api.Framework, "__init__", on_a_gpu)
    spec = CellSpec(run_id="t", cell_id="c", cell_name="c", repeat=1, environment="numpy",
                    api="numpy", backend=None, image=None, workload="selftest", task="run",
                    batch_size=1, precision="float32", jit=False, size="full", tf32=None,
                    steps_per_execution=1, data="arrays", device="auto", options={},
                    steps=2, warmup_steps=1, seed=0, result_path=str(tmp_path / "r.json"))
    result = empty_result(spec)
    worker.start_framework(spec, result)
    assert events.index("idle") < events.index("import numpy_api")
    assert result["gpu_idle_power_w"] == 79.8 and result["gpu_energy_resolution_s"] == 0.02
