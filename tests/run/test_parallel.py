"""Every GPU of a VM busy: one cell per GPU at once, each worker pinned to its GPU.

Only the host's GPU list is faked (what NVML would say about a VM with three GPUs); the runner,
its lanes, the local executor and the worker processes are the real ones. The cells are the
diagnostic `selftest` workload in the runner's own interpreter (NumPy ignores GPUs), so these
tests build no framework environment. Checked: each live worker's CUDA_VISIBLE_DEVICES (read
from /proc while it runs), that three run at once and a CPU cell runs alone, the GPU named in
every record, and Ctrl-C in a parallel run (nothing lost, nothing repeated on --resume)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runner import settings
from runner.machine import hostinfo
from runner.machine.hostinfo import Gpu
from runner.paths import REPO_ROOT as REPO
from runner.run import scheduling
from tests.matrices import matrix_text, this_interpreter

GPUS = [{"index": i, "uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd",
         "name": "NVIDIA A100-SXM4-80GB"} for i in range(3)]
THREE_GPUS = {"gpu_count": 3, "gpu_name": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54.15",
              "gpus": GPUS}


@pytest.fixture
def three_gpu_host(monkeypatch):
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: dict(THREE_GPUS))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")   # local executor
    for var in (settings.FLAVOUR, settings.GPU, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


def selftest_matrix(name: str, sleeps: list[int], cpu_sleeps: Sequence[int] = (), steps: int = 4,
                    **run_settings: Any) -> str:
    benchmarks = [{"workload": "selftest", "options": {"behaviour": "ok", "sleep_ms": list(sleeps)}}]
    if cpu_sleeps:
        benchmarks.append({"workload": "selftest", "device": "cpu",
                           "options": {"behaviour": "ok", "sleep_ms": list(cpu_sleeps)}})
    return matrix_text(name, steps=steps, timeout=120, profile=None, **run_settings,
                       environments={"numpy-here": this_interpreter()}, benchmarks=benchmarks)


def live_workers(results_dir: Path) -> dict[str, str | None]:
    """Cell key → CUDA_VISIBLE_DEVICES of every worker process of runs under results_dir."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"runner.worker" not in args or not any(str(results_dir).encode() in a
                                                          for a in args):
                continue
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:          # it exited meanwhile
            continue
        if environ == [b""]:     # it began to exit (or to exec) between the two reads: no
            continue             # memory, so no variables to read; a live worker has some
        spec = next(a.decode() for a in args if a.endswith(b"spec.json"))
        variables = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
        out[Path(spec).parent.name] = variables.get("CUDA_VISIBLE_DEVICES")
    return out


class Watcher(threading.Thread):
    """Samples the live workers every 20 ms while a run goes on."""

    def __init__(self, results_dir: Path):
        super().__init__(daemon=True)
        self.results_dir = results_dir
        self.snapshots: list[dict[str, str | None]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.02):
            seen = live_workers(self.results_dir)
            if seen:
                self.snapshots.append(seen)

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.halt.set()
        self.join()


def records(results_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in results_dir.glob("*/*/cells/*.json")}


def test_one_cell_per_gpu_each_pinned_and_a_cpu_cell_alone(three_gpu_host, write_matrix,
                                                            run_cli, results_dir):
    matrix = write_matrix(selftest_matrix("par", [150, 151, 152, 153, 154, 155], cpu_sleeps=[156]),
                          with_environments=False)
    with Watcher(results_dir) as watcher:
        code, out, _ = run_cli(matrix)
    assert code == 0, out
    assert "parallel: 3 cells at once (one per GPU); CPU cells one at a time, alone " \
           "([run] parallel = 'auto': 3 GPUs visible)" in out
    found = records(results_dir)
    assert len(found) == 7 and all(r["status"] == "ok" for r in found.values())
    uuids = {g["uuid"]: g["index"] for g in GPUS}
    for record in found.values():
        meta = record["metadata"]
        assert meta["node_name"] and meta["executor"] == "local"
        if record["device"] == "cpu":
            assert "gpu_index" not in meta and "gpu_uuid" not in meta
            assert meta["env_flags"]["CUDA_VISIBLE_DEVICES"] == ""   # the worker hides GPUs
        else:   # pinned by UUID: the worker saw exactly its lane's GPU
            assert uuids[meta["gpu_uuid"]] == meta["gpu_index"]
            assert meta["env_flags"]["CUDA_VISIBLE_DEVICES"] == meta["gpu_uuid"]
            assert meta["env_flags"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    # what the live processes had, while they ran
    pinned = {key: record["metadata"].get("gpu_uuid") for key, record in found.items()}
    cpu_keys = {key for key, record in found.items() if record["device"] == "cpu"}
    for snapshot in watcher.snapshots:
        on_gpus = [visible for key, visible in snapshot.items() if key not in cpu_keys]
        assert on_gpus == [pinned[key] for key in snapshot if key not in cpu_keys]
        assert len(set(on_gpus)) == len(on_gpus), f"two workers on one GPU: {snapshot}"
        if cpu_keys & set(snapshot):
            assert len(snapshot) == 1, f"a CPU cell ran beside others: {snapshot}"
    assert max(len(s) for s in watcher.snapshots) == 3        # every GPU busy at once
    assert {r["metadata"]["gpu_index"] for r in found.values() if r["device"] != "cpu"} == {0, 1, 2}


def test_parallel_caps_the_lanes_and_one_means_one_at_a_time(three_gpu_host, write_matrix,
                                                              run_cli, results_dir):
    matrix = write_matrix(selftest_matrix("cap", [100, 101, 102, 103]), with_environments=False)
    with Watcher(results_dir) as watcher:
        code, out, _ = run_cli(matrix, "--parallel", "2")
    assert code == 0, out
    assert "parallel: 2 cells at once (one per GPU); CPU cells one at a time, alone " \
           "(--parallel 2: 3 GPUs visible)" in out
    assert max(len(s) for s in watcher.snapshots) == 2
    assert {r["metadata"]["gpu_index"] for r in records(results_dir).values()} == {0, 1}

    code, out, _ = run_cli(matrix, "--parallel", "1")
    assert code == 0 and "parallel: 1 cell at a time, on GPU 0 (--parallel 1: 3 GPUs visible)" \
        in out


def test_cuda_visible_devices_of_the_runner_limits_its_gpus(three_gpu_host, monkeypatch):
    gpus = hostinfo.gpus()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"2,{GPUS[0]['uuid']}")
    assert [g.index for g in hostinfo.visible_gpus(gpus)] == [0, 2]
    monkeypatch.setenv(settings.GPU, "1")            # DL_BENCH_GPU picks among all
    assert [g.index for g in hostinfo.visible_gpus(gpus)] == [1]


def test_lanes_without_gpus_and_with_a_gpu_list_nvml_did_not_give():
    assert scheduling.gpu_lanes("auto", [], "x") == ([scheduling.CPU_LANE],
                                                     "no GPU: one cell at a time")
    lanes, why = scheduling.gpu_lanes(8, [Gpu(0), Gpu(1, "GPU-x")], "[run] parallel = 8")
    assert [lane.gpu.device_id for lane in lanes] == ["0", "GPU-x"]
    assert why == "[run] parallel = 8: 2 GPUs visible"


def test_gpu_facts_without_a_list_give_indices(monkeypatch):
    monkeypatch.setattr(hostinfo, "gpu_facts", lambda: {"gpu_count": 2, "gpu_name": "A100"})
    assert hostinfo.gpus() == [Gpu(0, None, "A100"), Gpu(1, None, "A100")]


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5"])
def test_a_bad_parallel_flag_is_one_line(value, write_matrix, run_cli):
    code, _, err = run_cli("plan", write_matrix(selftest_matrix("bad", [1]), with_environments=False),
                           "--parallel", value)
    assert code == 2 and "--parallel" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", [0, True, "al"])
def test_a_bad_parallel_setting_is_one_line(value, write_matrix, run_cli):
    text = selftest_matrix("bad", [1], parallel=value)
    code, _, err = run_cli("plan", write_matrix(text, with_environments=False))
    assert code == 2 and "run.parallel" in err and len(err.strip().splitlines()) == 1


# --- Ctrl-C in a parallel run ---------------------------------------------------------------------

FAKE_AND_RUN = f"""
import sys
from runner import cli
from runner.machine import hostinfo
hostinfo.gpu_facts = lambda: {THREE_GPUS!r}
sys.exit(cli.main(sys.argv[1:]))
"""


def start_runner(matrix: Path, results_dir: Path, *extra: str) -> subprocess.Popen:
    """The runner in a process of its own, on the faked three-GPU host, Ctrl-C as a terminal
    delivers it."""
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.Popen(
        [sys.executable, "-c", FAKE_AND_RUN, str(matrix), "--results-dir", str(results_dir),
         *extra], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow    # two runner processes, about 20 s
def test_ctrl_c_in_a_parallel_run_keeps_finished_cells_and_resume_runs_the_rest(write_matrix,
                                                                                results_dir):
    matrix = write_matrix(selftest_matrix("ctrlc", [100, 101, 102, 103, 500, 501, 502], steps=6),
                          with_environments=False)
    runner = start_runner(matrix, results_dir)
    deadline = time.monotonic() + 120
    while len(records(results_dir)) < 2 or len(live_workers(results_dir)) < 2:
        assert time.monotonic() < deadline and runner.poll() is None, runner.stdout.read()
        time.sleep(0.02)
    runner.send_signal(signal.SIGINT)
    output, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, output
    assert "interrupted: finished cells are kept" in output
    assert live_workers(results_dir) == {}       # every lane's worker was killed
    before = {key: json.dumps(r, sort_keys=True) for key, r in records(results_dir).items()}
    assert 2 <= len(before) < 7
    assert all(json.loads(r)["status"] == "ok" for r in before.values())   # none half-stored

    (run_dir,) = list(results_dir.glob("ctrlc/*"))
    resumed = start_runner(matrix, results_dir, "--resume", str(run_dir))
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    after = records(results_dir)
    assert len(after) == 7 and all(r["status"] == "ok" for r in after.values())
    for key, text in before.items():
        assert json.dumps(after[key], sort_keys=True) == text     # finished ones untouched
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 7


# --- one block size per cell ----------------------------------------------------------------------

def by_cell(found: dict[str, dict]) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for record in found.values():
        out.setdefault(record["cell_id"], {})[record["repeat"]] = record
    return out


def test_later_repeats_wait_for_their_cells_first_and_take_its_block_size(
        three_gpu_host, write_matrix, run_cli, results_dir):
    """Two cells × 3 repeats on three lanes: each cell's first repeat calibrates its block, the
    later ones start only once it finished (the other cell's entries meanwhile) and are handed
    its calls_per_sample, so every repeat takes as many samples of the same block."""
    text = selftest_matrix("blocks", [2, 3], steps=200, repeats=3)
    with Watcher(results_dir) as watcher:
        code, out, _ = run_cli(write_matrix(text, with_environments=False))
    assert code == 0, out
    cells = by_cell(records(results_dir))
    assert len(cells) == 2
    for reps in cells.values():
        first = reps[1]
        assert first["block_source"] == "calibrated" and first["calls_per_sample"] > 1
        for later in (reps[2], reps[3]):
            assert later["block_source"] == "handed_over"
            assert later["calls_per_sample"] == first["calls_per_sample"]
            assert len(later["samples_ms"]) == len(first["samples_ms"])
            assert "first repeat calibrated it" in later["timing"]
    for snapshot in watcher.snapshots:
        firsts = {key.rsplit("-r", 1)[0] for key in snapshot if key.endswith("-r1")}
        assert not any(key.rsplit("-r", 1)[0] in firsts for key in snapshot
                       if not key.endswith("-r1")), f"a later repeat beside its first: {snapshot}"
    assert max(len(s) for s in watcher.snapshots) >= 2       # the lanes did not run one by one


def test_resume_hands_the_stored_first_repeats_block_size_to_the_rest(write_matrix, run_cli,
                                                                      results_dir):
    matrix = write_matrix(selftest_matrix("resumed", [2], steps=100), with_environments=False)
    assert run_cli(matrix)[0] == 0
    matrix.write_text(selftest_matrix("resumed", [2], steps=100, repeats=3))
    code, out, _ = run_cli(matrix, "--resume")
    assert code == 0, out
    (reps,) = by_cell(records(results_dir)).values()
    assert reps[1]["block_source"] == "calibrated"
    assert [reps[k]["block_source"] for k in (2, 3)] == ["handed_over", "handed_over"]
    assert {reps[k]["calls_per_sample"] for k in (1, 2, 3)} == {reps[1]["calls_per_sample"]}


def test_the_live_display_is_quiet_while_cells_run():
    """Issue 49 item 11: while a cell's window is timed the runner's own process shares the host
    with it. Its live display redrew ten times a second (rich's default): 1.4–1.6 % of a CPU
    with a terminal, 0.6 % without one, against 0.2–0.6 % at one redraw a second (the runner's
    process sampled over 5 s of a numpy cell's window on the 2-core VM, 2026-11-27)."""
    import io

    from rich.console import Console

    seen = []
    lanes = scheduling.Lanes([scheduling.CPU_LANE], Console(file=io.StringIO()))
    lanes.run(["a"], scheduling.Policy(), run_one=lambda e, lane, show: e,
              done=lambda e, r, progress: seen.append(progress.live.refresh_per_second),
              interrupt=lambda: None)
    assert seen == [scheduling.QUIET_REFRESH_HZ] and scheduling.QUIET_REFRESH_HZ <= 1


def test_one_policy_says_where_and_when_each_entry_runs():
    """scheduling.Policy, built once, is all the lanes know of an entry: a CPU entry alone, one
    that waits for another's result, a wide one on joined lanes, a gate that stops the run."""
    from rich.console import Console

    finished: list[str] = []
    events: list[tuple[str, str]] = []
    running: set[str] = set()
    seen: dict[str, tuple[str, set[str]]] = {}
    lock = threading.Lock()

    def run_one(entry, lane, show):
        with lock:
            seen[entry] = (lane.label, set(running))
            events.append(("start", entry))
            running.add(entry)
        time.sleep(0.05)
        with lock:
            running.discard(entry)
        return entry

    policy = scheduling.Policy(label=str, alone=lambda e: e == "cpu",
                               ready=lambda e: e != "second" or "first" in finished,
                               gate=lambda e: "over budget" if e == "last" else None,
                               width=lambda e: 2 if e == "wide" else 1)
    lanes = scheduling.Lanes(scheduling.gpu_lanes("auto", [Gpu(0), Gpu(1)], "x")[0],
                             Console(quiet=True))
    def done(entry, result, progress):
        finished.append(result)
        with lock:
            events.append(("done", entry))

    lanes.run(["second", "first", "a", "wide", "cpu", "last", "never"], policy, run_one, done,
              lambda: None)
    assert lanes.stopped == "over budget" and "last" not in seen and "never" not in seen
    assert events.index(("done", "first")) < events.index(("start", "second"))   # it waited
    assert seen["wide"][0] == "GPU 0+1" and not seen["wide"][1]       # both lanes, alone
    assert seen["cpu"] == ("CPU", set())                              # nothing beside it
    assert sorted(finished) == ["a", "cpu", "first", "second", "wide"]
