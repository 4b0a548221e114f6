"""The telemetry sampler (runner/worker/monitor.py).

Where no GPU exists, NVML is replaced by a fake module object handed to `Nvml(...)` only (the
class takes the module as a constructor argument; nothing is patched globally). The real sampler
is checked by the `gpu` test, which runs with `pytest -m gpu` on a GPU machine.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pynvml  # nvidia-ml-py: its constants are the reference the decoding is checked against
import pytest

from runner.worker import monitor
from runner.worker.monitor import CLOCK_EVENTS, SLOWDOWN_EVENTS, Monitor, Nvml
from runner.worker.protocol import CellSpec

SW_POWER_CAP = pynvml.nvmlClocksThrottleReasonSwPowerCap
SW_THERMAL = pynvml.nvmlClocksThrottleReasonSwThermalSlowdown
HW_THERMAL = pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
HW_SLOWDOWN = pynvml.nvmlClocksThrottleReasonHwSlowdown
SYNC_BOOST = pynvml.nvmlClocksThrottleReasonSyncBoost
DISPLAY_CLOCK = pynvml.nvmlClocksThrottleReasonDisplayClockSetting
POWER_BRAKE = pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown
GPU_IDLE = pynvml.nvmlClocksThrottleReasonGpuIdle


class FakeNvmlError(Exception):
    """What nvidia-ml-py raises for an unsupported query (NVMLError_NotSupported)."""


class FakePynvml:
    """The slice of nvidia-ml-py's module that Nvml uses, with scripted answers; its constants
    (clock-event bits, clock ids) are nvidia-ml-py's own."""

    def __init__(self, energy_mj=(1_000_000, 1_012_500), reasons=SW_POWER_CAP | SW_THERMAL,
                 power_mw=250_000, unsupported=(), processes=(), sm_clocks=(1410,),
                 mem_clocks=(1593,)):
        self.energy = list(energy_mj)
        self.reasons = reasons
        self.power_mw = power_mw
        self.unsupported = set(unsupported)
        self.processes = list(processes)     # (pid, bytes) of compute processes on the device
        self.sm_clocks = list(sm_clocks)     # successive reads; the last one repeats
        self.mem_clocks = list(mem_clocks)

    def __getattribute__(self, name):
        if name.startswith("nvmlDevice") and name in object.__getattribute__(self, "unsupported"):
            def fail(*args):
                raise FakeNvmlError(name)
            return fail
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        if name.startswith(("nvmlClocks", "NVML_")):      # constants: the real module's
            return getattr(pynvml, name)
        raise AttributeError(name)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self.energy.pop(0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=80, memory=30)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self.power_mw

    def nvmlDeviceGetClockInfo(self, handle, clock):
        reads = self.sm_clocks if clock == pynvml.NVML_CLOCK_SM else self.mem_clocks
        return reads.pop(0) if len(reads) > 1 else reads[0]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 61

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=3 * 2**30, total=80 * 2**30)

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA A100-SXM4-80GB"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-1234"

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 400_000

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1

    def nvmlDeviceGetMigMode(self, handle):
        return (0, 0)

    def nvmlDeviceGetEccMode(self, handle):
        return (1, 1)


def run_window(gpu: Nvml | None, seconds: float = 0.25, interval_s: float = 0.05) -> dict:
    with Monitor(interval_s=interval_s, gpu=gpu) as mon:
        time.sleep(seconds)
    return mon.summary()


def test_energy_is_the_counter_delta_over_the_window():
    summary = run_window(Nvml(FakePynvml(energy_mj=(1_000_000, 1_012_500)), handle="h0"))
    assert summary["gpu_energy_j"] == pytest.approx(12.5)   # (1 012 500 - 1 000 000) mJ
    assert summary["telemetry_window_s"] == pytest.approx(0.25, abs=0.1)


def test_averages_and_peaks_from_samples():
    summary = run_window(Nvml(FakePynvml(power_mw=250_000), handle="h0"))
    assert summary["gpu_power_mean_w"] == 250.0
    assert summary["gpu_util_mean"] == 80
    assert summary["gpu_sm_clock_mhz"] == 1410
    assert summary["nvml_memory_peak_mb"] == 3 * 1024
    assert summary["gpu_temp_max_c"] == 61


def test_clock_event_bits_become_names():
    summary = run_window(Nvml(FakePynvml(reasons=SW_POWER_CAP | SYNC_BOOST | HW_THERMAL | GPU_IDLE),
                              handle="h0"))
    # GPU idle is not a reason worth flagging and has no name
    assert summary["gpu_clock_events"] == ["hw_thermal_slowdown", "sw_power_cap", "sync_boost"]
    assert set(summary["gpu_clock_events"]) & SLOWDOWN_EVENTS == {"hw_thermal_slowdown",
                                                                  "sw_power_cap"}
    assert SLOWDOWN_EVENTS <= set(CLOCK_EVENTS.values())


@pytest.mark.parametrize("suffix, name", sorted(CLOCK_EVENTS.items()))
def test_every_reason_is_decoded_from_the_nvml_constant(suffix, name):
    """Each reason alone, its bit taken from nvidia-ml-py (under either spelling)."""
    bit = getattr(pynvml, "nvmlClocksEventReason" + suffix,
                  getattr(pynvml, "nvmlClocksThrottleReason" + suffix, None))
    assert bit is not None, suffix
    assert run_window(Nvml(FakePynvml(reasons=bit), handle="h0"))["gpu_clock_events"] == [name]


def test_software_thermal_slowdown_is_a_slowdown_and_the_display_clock_is_not():
    """The usual A100/H100 throttle was read as sync_boost, and a display-clock event as a power
    brake, by a bit map shifted by one from 0x10 up."""
    thermal = run_window(Nvml(FakePynvml(reasons=SW_THERMAL), handle="h0"))["gpu_clock_events"]
    assert thermal == ["sw_thermal_slowdown"] and set(thermal) <= SLOWDOWN_EVENTS
    display = run_window(Nvml(FakePynvml(reasons=DISPLAY_CLOCK), handle="h0"))["gpu_clock_events"]
    assert display == ["display_clock_setting"] and not set(display) & SLOWDOWN_EVENTS
    brake = run_window(Nvml(FakePynvml(reasons=POWER_BRAKE), handle="h0"))["gpu_clock_events"]
    assert brake == ["hw_power_brake_slowdown"]


def test_no_literal_bits_in_the_decoder():
    """The map names nvidia-ml-py constants, never numbers."""
    assert all(isinstance(key, str) for key in CLOCK_EVENTS)
    assert monitor.clock_event_bits(pynvml) == {
        getattr(pynvml, "nvmlClocksThrottleReason" + suffix): name
        for suffix, name in CLOCK_EVENTS.items()}


def test_older_drivers_fall_back_to_throttle_reasons():
    fake = FakePynvml(reasons=HW_SLOWDOWN, unsupported={"nvmlDeviceGetCurrentClocksEventReasons"})
    fake.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: HW_SLOWDOWN
    assert run_window(Nvml(fake, handle="h0"))["gpu_clock_events"] == ["hw_slowdown"]


def test_unsupported_queries_are_null_not_zero():
    fake = FakePynvml(unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption",
                                   "nvmlDeviceGetMemoryInfo"})
    summary = run_window(Nvml(fake, handle="h0"))
    assert summary["gpu_power_mean_w"] is None
    assert summary["gpu_energy_j"] is None
    assert summary["nvml_memory_peak_mb"] is None
    assert summary["gpu_util_mean"] == 80  # the rest still works


def test_metadata_from_nvml():
    meta = Nvml(FakePynvml(), handle="h0").metadata()
    assert meta["gpu_name"] == "NVIDIA A100-SXM4-80GB" and meta["driver_version"] == "550.54.15"
    assert meta["gpu_power_limit_w"] == 400.0 and meta["gpu_mig_mode"] is False
    assert meta["gpu_ecc_mode"] is True and meta["gpu_sm_clock_start_mhz"] == 1410


def test_without_a_gpu_every_gpu_figure_is_absent():
    summary = run_window(None)
    # no zeros for GPU fields; the host's CPU load applies without a GPU too
    assert set(summary) == {"cpu_util_mean", "telemetry_window_s", "host_other_cpu"}
    assert summary["cpu_util_mean"] is not None


def test_no_gpu_here_means_no_nvml_handle():
    if _real_gpu():
        pytest.skip("this machine has a GPU")
    assert Nvml.open() is None


def test_rss_figures():
    assert 0 < monitor.rss_mb() <= monitor.peak_rss_mb() * 1.01


def _real_gpu() -> bool:
    handle = Nvml.open()
    return handle is not None


@pytest.mark.gpu
@pytest.mark.skipif(not _real_gpu(), reason="needs an NVIDIA GPU (NVML found none)")
def test_real_nvml_sampler():
    gpu = Nvml.open()
    meta = gpu.metadata()
    assert meta["gpu_name"] and meta["driver_version"] and meta["gpu_count"] >= 1
    summary = run_window(gpu, seconds=1.5, interval_s=0.1)
    assert summary["telemetry_window_s"] >= 1.5
    assert summary["gpu_energy_j"] is not None and summary["gpu_energy_j"] > 0
    assert summary["gpu_power_mean_w"] > 0 and summary["gpu_sm_clock_mhz"] is not None
    assert summary["nvml_memory_peak_mb"] > 0
    assert set(summary["gpu_clock_events"]) <= set(CLOCK_EVENTS.values())


def test_host_side_gpu_figures_reach_the_record(tmp_path):
    """A container cell's host-side NVML window (fake NVML here: no GPU) is saved beside the
    result and lands in the record's host_gpu field, next to the worker's own figures."""
    from runner.executors.containers import save_host_gpu
    from runner.executors.base import Outcome
    from runner.results.data.records import finalize
    monitor = Monitor(interval_s=0.05,
                      gpu=Nvml(FakePynvml(energy_mj=(5_000_000, 5_020_000)), handle="h0"))
    monitor.__enter__()
    time.sleep(0.2)
    summary = save_host_gpu(monitor, tmp_path / "host_gpu.json")
    assert json.loads((tmp_path / "host_gpu.json").read_text()) == summary
    assert summary["gpu_energy_j"] == pytest.approx(20.0) and summary["window_s"] > 0.1
    assert "cpu_util_mean" not in summary  # the host's CPU is not the cell's
    assert "host_other_cpu" not in summary  # from the host, the container's worker is "other"

    spec = CellSpec(run_id="r", cell_id="c", cell_name="matmul-run-numpy-b1", repeat=0,
                    environment="numpy", api="numpy", backend=None, image="numpy",
                    workload="matmul", task="run", batch_size=1, precision="float32", jit="auto",
                    size="tiny", tf32=None, steps_per_execution=1, data="arrays", device="auto",
                    options={"n": 8}, steps=1, warmup_steps=1, seed=0, result_path="")
    record = finalize(spec, Outcome(returncode=1, timed_out=False, wall_s=1.0, host_gpu=summary),
                      None, {}, "logs/x.log")
    assert record["host_gpu"] == summary and record["gpu_energy_j"] is None


class TimedEnergy(FakePynvml):
    """Energy reads stamped with the clock; each sample costs what real NVML queries can (tens
    of ms on a busy driver), so a sample taken before the end read would show."""

    SAMPLE_S = 0.03

    def __init__(self):
        super().__init__(energy_mj=(1_000_000, 1_050_000))
        self.energy_read_at: list[float] = []

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.energy_read_at.append(time.perf_counter())
        return super().nvmlDeviceGetTotalEnergyConsumption(handle)

    def nvmlDeviceGetUtilizationRates(self, handle):
        time.sleep(self.SAMPLE_S)
        return super().nvmlDeviceGetUtilizationRates(handle)


def window_spec(steps) -> CellSpec:
    from runner.worker.protocol import CellSpec

    return CellSpec(run_id="r", cell_id="c", cell_name="x", repeat=1, environment="e", api="numpy",
                    backend=None, image=None, workload="matmul", task="run", batch_size=1,
                    precision="float32", jit=False, size="tiny", tf32=None, steps_per_execution=1,
                    data="arrays", device="gpu", options={}, steps=steps, warmup_steps=1, seed=0,
                    result_path="")


NO_COUNTER = SimpleNamespace(compilation_count=lambda: None, compilations_counted="")


@pytest.mark.parametrize("teardown_s", [0.0, 0.2])
def test_the_energy_window_ends_with_the_last_timed_sample(teardown_s):
    """The counter is read when the last timed sample is filed: before the sampler is joined
    or sampled once more, and before a framework-owned loop (Keras fit) tears down."""
    from runner.worker.__main__ import timed_window
    from runner.worker.bench import Bench

    fake = TimedEnergy()

    def drive(clock):
        while not clock.done:
            time.sleep(0.005)
            clock.tick(None)
        time.sleep(teardown_s)              # what fit does after its last call

    bench = Bench(items_per_step=1, drive=drive)
    clock, mon = timed_window(window_spec(12), bench, Nvml(fake, handle="h0"), NO_COUNTER)
    start_read, end_read = fake.energy_read_at
    last_tick = clock._last                 # the clock reading that closed the last sample
    # Bounds under one sample's cost (SAMPLE_S) and the teardown, with room for a loaded
    # machine that preempts the main thread between the tick and the read.
    assert 0 <= end_read - last_tick < TimedEnergy.SAMPLE_S / 2, (end_read - last_tick)
    assert mon.summary()["gpu_energy_j"] == pytest.approx(50.0)
    assert mon.window_s == pytest.approx(clock.timed_window_s, abs=TimedEnergy.SAMPLE_S / 2)


# --- what else ran during the window; clocks as mean and min -----------------------------------

def test_another_process_on_the_gpu_is_recorded_with_its_share():
    """NVML lists the worker itself and pid 1 (another process, its name read from /proc)."""
    own = os.getpid()
    fake = FakePynvml(processes=[(own, 2 * 2**30), (1, 512 * 2**20)])
    other = run_window(Nvml(fake, handle="h0"))["gpu_other_processes"]
    assert other["share"] == 1.0 and other["own_pid_listed"] is True
    assert [p["pid"] for p in other["processes"]] == [1]
    assert other["processes"][0]["used_mb"] == 512.0
    assert other["processes"][0]["name"] == Path("/proc/1/comm").read_text().strip()


def test_the_worker_alone_on_the_gpu_is_no_other_process():
    fake = FakePynvml(processes=[(os.getpid(), 2**30)])
    other = run_window(Nvml(fake, handle="h0"))["gpu_other_processes"]
    assert other["share"] == 0.0 and other["processes"] == []


def test_in_a_container_one_listed_process_is_the_worker_and_a_second_is_another():
    """NVML names host pids there: the worker's own pid is not among them."""
    alone = FakePynvml(processes=[(999_001, 2**30)])
    seen = run_window(Nvml(alone, handle="h0"))["gpu_other_processes"]
    assert seen["share"] == 0.0 and seen["processes"] == [] and not seen["own_pid_listed"]
    shared = FakePynvml(processes=[(999_001, 2**30), (999_002, 2**30)])
    seen = run_window(Nvml(shared, handle="h0"))["gpu_other_processes"]
    assert seen["share"] == 1.0 and len(seen["processes"]) == 2


def test_no_process_list_is_null_not_an_empty_gpu():
    fake = FakePynvml(unsupported={"nvmlDeviceGetComputeRunningProcesses"})
    assert run_window(Nvml(fake, handle="h0"))["gpu_other_processes"] is None


def test_sm_and_memory_clocks_are_recorded_as_mean_and_min():
    fake = FakePynvml(sm_clocks=(1410, 1410, 1200, 1410), mem_clocks=(1593, 1215, 1593))
    gpu = Nvml(fake, handle="h0")
    mon = Monitor(gpu=gpu)
    mon.samples = [gpu.sample() for _ in range(4)]       # four samples of the window
    figures = mon.summary()
    assert figures["gpu_sm_clock_min_mhz"] == 1200 and figures["gpu_sm_clock_mhz"] == 1357.5
    assert figures["gpu_mem_clock_min_mhz"] == 1215
    assert figures["gpu_mem_clock_mhz"] == pytest.approx((1593 + 1215 + 1593 + 1593) / 4)


def test_other_processes_cpu_time_is_the_hosts_busy_time_minus_the_workers():
    start = {"busy": 100.0, "steal": 5.0, "cpus": 4.0}
    end = {"busy": 103.5, "steal": 5.4, "cpus": 4.0}
    load = monitor.other_cpu_load(start, end, own_cpu_s=1.5, window_s=2.0)
    assert load["other_cpu_s"] == pytest.approx(2.0)        # 3.5 s busy, 1.5 s of them ours
    assert load["share"] == pytest.approx(0.25)             # of 4 CPUs × 2 s
    assert load["steal_share"] == pytest.approx(0.05)
    assert monitor.other_cpu_load(None, end, 1.0, 2.0) is None
    tick = monitor.other_cpu_load(start, {**end, "busy": 100.99}, own_cpu_s=1.0, window_s=1.0)
    assert tick["other_cpu_s"] == 0.0                       # a tick's rounding is not load


def test_the_window_reads_the_hosts_cpu_counters():
    """The real counters (psutil): a busy thread of this process is the worker's own time."""
    with Monitor(interval_s=0.05) as mon:
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
    load = mon.summary()["host_other_cpu"]
    assert load is not None and load["cpus"] >= 1 and 0.0 <= load["share"] <= 1.0


class CountingEnergy(FakePynvml):
    """An energy counter that moves every `period_s` by `watts` × period (in mJ), as NVML's."""

    def __init__(self, watts: float, period_s: float):
        super().__init__()
        self.watts, self.period_s, self.started = watts, period_s, time.perf_counter()

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        ticks = int((time.perf_counter() - self.started) / self.period_s)
        return 5_000_000 + int(ticks * self.period_s * self.watts * 1000)


def test_the_idle_power_and_the_counters_resolution_are_measured_at_rest():
    """Before the warm-up the worker watches the counter: its update interval decides the
    energy window the host trusts, and its delta the power at rest (issue 37 item 10)."""
    idle = Nvml(CountingEnergy(watts=62.0, period_s=0.05), handle="h0").idle(seconds=0.6)
    assert idle["gpu_energy_resolution_s"] == pytest.approx(0.05, abs=0.01)
    assert idle["gpu_idle_power_w"] == pytest.approx(62.0, rel=0.1)
    assert Nvml(FakePynvml(energy_mj=[7] * 1000), handle="h0").idle(seconds=0.1) == {}


def test_a_coarse_counter_lengthens_an_auto_window_on_a_gpu():
    from runner.worker.__main__ import energy_window

    result = {"gpu_energy_resolution_s": 0.1, "extra": {}}
    longer = energy_window(window_spec("auto"), object(), result)
    assert longer.min_time_s == pytest.approx(2.0) and result["extra"]["energy_min_window_s"] == 2.0
    assert energy_window(window_spec("auto"), None, {"extra": {}}).min_time_s == 1.0   # a CPU
    assert energy_window(window_spec(12), object(), result).steps == 12   # a fixed count stays
