"""The processes of a torch data-parallel cell (DDP, one process per device; docs/scaling.md),
launched by the worker itself as torchrun would: the worker the executor started is rank 0; it
starts ranks 1 … N−1 as `python -m runner.worker spec.json rank-<k>.json` beside its own result,
with torch.distributed's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT on
the loopback). Every rank runs the same cell (build, warm-up, calibration, timed window, answer)
and so the same collectives; rank 0's clock decides for all (bench.StepClock.agree), rank 0's
record is the cell's, and every rank's memory goes into its extra.ranks.

A rank that fails leaves the others waiting in a collective: rank 0 watches its followers and,
when one ends without an ok result, writes the cell's failed record (that rank's error) and
ends every process of the cell. The executor's timeout kills the whole process group besides.
Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .apis.data_parallel import LOCAL_RANK_ENV, RANK_ENV, WORLD_ENV, process_per_device
from .protocol import CellSpec, WorkerResult

ADDRESS_ENV, PORT_ENV = "MASTER_ADDR", "MASTER_PORT"
POLL_S = 0.5
# Per rank, what extra.ranks keeps of its record.
RANK_FIELDS = ("status", "rss_peak_mb", "vram_peak_mb", "nvml_memory_peak_mb", "gpu_energy_j",
               "error")


def rank() -> int:
    return int(os.environ.get(RANK_ENV, "0"))


def own_gpu() -> str | None:
    """The GPU this rank computes on, as NVML names it (its entry of CUDA_VISIBLE_DEVICES, the
    lane's); None: the first, as for every one-process cell."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    return visible[rank()] if 0 < rank() < len(visible) else None


def rank_result(result_path: str, number: int) -> Path:
    return Path(result_path).with_name(f"rank-{number}.json")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Followers:
    """Ranks 1 … N−1 of a cell, started by rank 0."""

    def __init__(self, spec: CellSpec, spec_path: str, result_path: str) -> None:
        self.devices = spec.devices
        self.result_path = result_path
        port = free_port()
        common = {ADDRESS_ENV: "127.0.0.1", PORT_ENV: str(port), WORLD_ENV: str(spec.devices)}
        os.environ.update(common, **{RANK_ENV: "0", LOCAL_RANK_ENV: "0"})
        self.processes: dict[int, subprocess.Popen] = {}
        for number in range(1, spec.devices):
            path = rank_result(result_path, number)
            path.unlink(missing_ok=True)
            env = {**os.environ, **common, RANK_ENV: str(number), LOCAL_RANK_ENV: str(number)}
            self.processes[number] = subprocess.Popen(
                [sys.executable, "-m", "runner.worker", spec_path, str(path)], env=env)
        self._done = threading.Event()

    def failure(self) -> str | None:
        """Why the cell cannot go on: a follower that ended without an ok result."""
        for number, process in self.processes.items():
            code = process.poll()
            if code is None:
                continue
            found = read_result(rank_result(self.result_path, number))
            if found is None:
                return f"rank {number} exited with code {code} and no result"
            if found.get("status") != "ok":
                return f"rank {number}: {found.get('status')}: {found.get('error') or ''}".strip()
        return None

    def watch(self, on_failure: Callable[[str], None]) -> None:
        """Poll the followers in a thread until `finish`; on a failure, `on_failure(why)` (which
        ends this process: rank 0 is then stuck in a collective)."""
        def loop() -> None:
            while not self._done.wait(POLL_S):
                why = self.failure()
                if why is not None and not self._done.is_set():
                    self.stop()
                    on_failure(why)
                    return

        threading.Thread(target=loop, name="ranks", daemon=True).start()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()

    def finish(self, ok: bool, timeout_s: float = 120.0) -> list[dict[str, Any]]:
        """Rank 0 is done: wait for the followers (killed at once where rank 0 failed, since they
        wait for it in a collective), and what extra.ranks keeps of each."""
        self._done.set()
        if not ok:
            self.stop()
        deadline = time.monotonic() + timeout_s
        out = []
        for number, process in self.processes.items():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            found = read_result(rank_result(self.result_path, number)) or {
                "status": "crashed", "error": f"no result (exit code {process.returncode})"}
            out.append({"rank": number, **{k: found.get(k) for k in RANK_FIELDS}})
        return out


def read_result(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def launch(spec: CellSpec, spec_path: str, result_path: str) -> Followers | None:
    """Rank 0 of a DDP cell starts its followers; every other cell (and rank) starts none."""
    if not process_per_device(spec) or RANK_ENV in os.environ and rank() != 0:
        return None
    return Followers(spec, spec_path, result_path)


def merge(result: WorkerResult, followers: list[dict[str, Any]]) -> None:
    """Rank 0's record: every rank's memory (and energy) in extra.ranks; the cell fails where a
    follower did."""
    own = {"rank": 0, **{k: result.get(k) for k in RANK_FIELDS}}
    result["extra"]["ranks"] = [own, *followers]
    failed = next((f for f in followers if f["status"] != "ok"), None)
    if failed is not None and result["status"] == "ok":
        result["status"] = failed["status"]
        result["error"] = f"rank {failed['rank']}: {failed.get('error') or failed['status']}"
