"""A real local Ray cluster for the Ray tests (tests/executors/test_ray*.py): a head and a worker
node on loopback addresses, started with `ray start` in sessions of their own so that stopping ends
exactly the processes they started (never `ray stop`, which would end every Ray on the machine);
and what those tests read back from a run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"   # two loopback addresses: two nodes, one host


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalCluster:
    """`ray start` for a head and a worker node, each in a session of its own, so that stopping
    ends exactly the processes they started (and the workers those started)."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.address = f"{HEAD_IP}:{self.port}"
        self.starters: list[int] = []
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("RAY_ADDRESS", "CUDA_VISIBLE_DEVICES")}
        self.ray = str(Path(sys.executable).parent / "ray")

    def start_node(self, *args: str) -> None:
        common = ["--num-cpus=1", "--num-gpus=1", "--disable-usage-stats",
                  "--object-store-memory=100000000",
                  f"--dashboard-agent-listen-port={free_port()}"]
        log_path = self.root / f"node-{len(self.starters)}.log"
        with log_path.open("w") as log:
            starter = subprocess.Popen([self.ray, "start", *args, *common], stdout=log,
                                       stderr=subprocess.STDOUT, env=self.env,
                                       start_new_session=True, stdin=subprocess.DEVNULL)
            # Its daemons stay in the session it leads: the session id is its pid.
            self.starters.append(starter.pid)
            assert starter.wait(timeout=120) == 0, log_path.read_text()

    def start(self) -> LocalCluster:
        self.start_node("--head", f"--node-ip-address={HEAD_IP}", f"--port={self.port}",
                        f"--temp-dir={self.root}", "--include-dashboard=false",
                        f"--ray-client-server-port={free_port()}")
        self.start_node(f"--address={self.address}", f"--node-ip-address={WORKER_IP}")
        return self

    def processes(self) -> list:
        """Every process of this cluster: its daemons (by session) and their descendants."""
        import psutil

        found = {}
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getsid(proc.pid) in self.starters:
                    found[proc.pid] = proc
                    for child in proc.children(recursive=True):
                        found[child.pid] = child
            except (psutil.Error, ProcessLookupError):
                continue
        return list(found.values())

    def task_processes(self) -> list:
        """Ray worker processes running one of the runner's cells now."""
        out = []
        for proc in self.processes():
            try:
                if " ".join(proc.cmdline()).startswith("ray::dl-bench cell "):
                    out.append(proc)
            except Exception:
                continue
        return out

    def stop(self) -> None:
        import psutil

        procs = self.processes()
        for proc in procs:
            try:
                proc.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=5)
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=10)


def records(run_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")}


def run_dirs(results_dir: Path, name: str) -> list[Path]:
    return sorted(p for p in (results_dir / name).glob("*") if (p / "manifest.json").exists())


def ray_args(cluster: LocalCluster) -> list[str]:
    return ["--executor", "ray", "--ray-address", cluster.address]
