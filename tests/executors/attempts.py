"""Attempts for executor tests: a cell's spec and work folder, as the pipeline makes them."""

from __future__ import annotations

from pathlib import Path

from runner.executors.base import Attempt, GpuRequest
from runner.worker.protocol import CellSpec


def cell_spec(**overrides) -> CellSpec:
    fields = dict(run_id="r-1", cell_id="abc", cell_name="matmul-run-numpy-b1", repeat=1,
                  environment="numpy", api="numpy", backend=None, image="numpy",
                  workload="matmul", task="run", batch_size=1, precision="float32", jit=False,
                  size="tiny", tf32=None, steps_per_execution=1, data="arrays", device="auto",
                  options={"n": 8}, steps=1, warmup_steps=1, seed=0, result_path="")
    return CellSpec(**{**fields, **overrides})


def attempt_in(tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 5,
               gpu: GpuRequest | None = None, **spec) -> Attempt:
    """An attempt whose work folder is tmp_path/work (made here), its log tmp_path/log."""
    work = tmp_path / "work"
    work.mkdir()
    return Attempt(spec=cell_spec(**spec), work_dir=work, log_path=tmp_path / "log",
                   env=dict(env or {}), timeout=timeout, gpu=gpu)
