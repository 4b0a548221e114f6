"""Process and GPU telemetry for the worker: RSS, CPU time, and NVML counters when a GPU exists;
what else ran during the timed window (other processes on the GPU, other processes' CPU time on
the host) and the SM and memory clocks (mean and min).

NVML comes from nvidia-ml-py (imported as `pynvml`), never the deprecated `pynvml` package.
Without a GPU (or without nvidia-ml-py) every GPU figure is null, never zero.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from typing import Any
from collections.abc import Callable

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# The NVML clock-event (throttle) reasons worth flagging, by the suffix of the nvidia-ml-py
# constant that holds each one's bit: nvmlClocksEventReason<suffix>, or
# nvmlClocksThrottleReason<suffix> in releases before the rename. The bits are always read from
# the pynvml module in use (clock_event_bits), never written here.
CLOCK_EVENTS = {
    "ApplicationsClocksSetting": "applications_clocks_setting",
    "SwPowerCap": "sw_power_cap",
    "HwSlowdown": "hw_slowdown",
    "SyncBoost": "sync_boost",
    "SwThermalSlowdown": "sw_thermal_slowdown",
    "HwThermalSlowdown": "hw_thermal_slowdown",
    "HwPowerBrakeSlowdown": "hw_power_brake_slowdown",
    "DisplayClockSetting": "display_clock_setting",
}
CLOCK_EVENT_PREFIXES = ("nvmlClocksEventReason", "nvmlClocksThrottleReason")
SLOWDOWN_EVENTS = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                   "hw_power_brake_slowdown"}


def clock_event_bits(pynvml: Any) -> dict[int, str]:
    """{bit: name} of CLOCK_EVENTS from the pynvml module's own constants (a reason the module
    does not define is left out)."""
    bits: dict[int, str] = {}
    for suffix, name in CLOCK_EVENTS.items():
        for prefix in CLOCK_EVENT_PREFIXES:
            value = getattr(pynvml, prefix + suffix, None)
            if isinstance(value, int):
                bits[value] = name
                break
    return bits


def clock_event_names(pynvml: Any, reasons: int) -> set[str]:
    """The names of the flagged reasons set in one NVML clock-event bit mask."""
    return {name for bit, name in clock_event_bits(pynvml).items() if reasons & bit}


def rss_mb() -> float:
    """Current resident set size of this process."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * _PAGE / 2**20


def peak_rss_mb() -> float:
    """Kernel high-water mark of this process's RSS (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# How long the device is watched at rest before the warm-up (Nvml.idle).
IDLE_S = 1.0


class Nvml:
    """A thin handle on one NVML device; `open()` returns None when there is no GPU."""

    def __init__(self, pynvml: Any, handle: Any):
        self.nv = pynvml
        self.handle = handle

    @classmethod
    def open(cls, pin: str | None = None) -> Nvml | None:
        """The device `pin` names (an NVML index or a UUID), by default the one this process
        computes on: NVML ignores CUDA_VISIBLE_DEVICES, so its first entry picks the handle."""
        visible = pin if pin is not None else \
            os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        try:
            import pynvml  # provided by nvidia-ml-py

            pynvml.nvmlInit()
            if visible.startswith(("GPU-", "MIG-")):
                return cls(pynvml, pynvml.nvmlDeviceGetHandleByUUID(visible))
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByIndex(int(visible or 0)))
        except Exception:  # no library, no driver, no device: no GPU figures
            return None

    def _try(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, fn)(self.handle, *args)
        except Exception:
            return None

    def metadata(self) -> dict[str, Any]:
        nv = self.nv
        meta: dict[str, Any] = {}

        def decode(value: Any) -> Any:
            return value.decode() if isinstance(value, bytes) else value

        meta["gpu_name"] = decode(self._try("nvmlDeviceGetName"))
        meta["gpu_uuid"] = decode(self._try("nvmlDeviceGetUUID"))
        try:
            meta["driver_version"] = decode(nv.nvmlSystemGetDriverVersion())
            meta["gpu_count"] = nv.nvmlDeviceGetCount()
        except Exception:
            pass
        limit = self._try("nvmlDeviceGetEnforcedPowerLimit")
        meta["gpu_power_limit_w"] = limit / 1000 if limit is not None else None
        persistence = self._try("nvmlDeviceGetPersistenceMode")
        meta["gpu_persistence_mode"] = bool(persistence) if persistence is not None else None
        mig = self._try("nvmlDeviceGetMigMode")
        meta["gpu_mig_mode"] = bool(mig[0]) if mig else None
        ecc = self._try("nvmlDeviceGetEccMode")
        meta["gpu_ecc_mode"] = bool(ecc[0]) if ecc else None
        meta["gpu_sm_clock_start_mhz"] = self._try("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        meta["gpu_mem_clock_start_mhz"] = self._try("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM)
        return {k: v for k, v in meta.items() if v is not None}

    def memory_used_mb(self) -> float | None:
        info = self._try("nvmlDeviceGetMemoryInfo")
        return info.used / 2**20 if info is not None else None

    def energy_mj(self) -> int | None:
        return self._try("nvmlDeviceGetTotalEnergyConsumption")

    def idle(self, seconds: float = IDLE_S, poll_s: float = 0.002) -> dict[str, float]:
        """The device at rest, before the cell's warm-up: the energy counter polled every
        `poll_s` for `seconds`. Its update interval (the median time between changes: what a
        window's energy can be resolved to) and the power its delta gives between the first and
        the last change (the idle power a window's energy is read against). Empty where the
        counter does not change twice."""
        changes: list[tuple[float, int]] = []
        last = self.energy_mj()
        started = time.perf_counter()
        while last is not None and time.perf_counter() - started < seconds:
            time.sleep(poll_s)
            value, now = self.energy_mj(), time.perf_counter()
            if value is not None and value != last:
                changes.append((now, value))
                last = value
        if len(changes) < 2:
            return {}
        (t0, e0), (t1, e1) = changes[0], changes[-1]
        gaps = sorted(b[0] - a[0] for a, b in zip(changes, changes[1:], strict=False))
        return {"gpu_idle_power_w": (e1 - e0) / 1000 / (t1 - t0),
                "gpu_energy_resolution_s": gaps[len(gaps) // 2]}

    def compute_processes(self) -> list[tuple[int, float | None]] | None:
        """(pid, MB of device memory) of every compute process on the device, as NVML lists
        them (pids of the host's namespace); None when NVML cannot list them."""
        listed = self._try("nvmlDeviceGetComputeRunningProcesses")
        if listed is None:
            return None
        return [(int(p.pid), p.usedGpuMemory / 2**20 if isinstance(p.usedGpuMemory, int)
                 else None) for p in listed]

    def sample(self) -> dict[str, Any]:
        util = self._try("nvmlDeviceGetUtilizationRates")
        power = self._try("nvmlDeviceGetPowerUsage")
        reasons = self._try("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._try("nvmlDeviceGetCurrentClocksThrottleReasons")
        return {
            "memory_mb": self.memory_used_mb(),
            "util": util.gpu if util is not None else None,
            "power_w": power / 1000 if power is not None else None,
            "sm_clock": self._try("nvmlDeviceGetClockInfo", self.nv.NVML_CLOCK_SM),
            "mem_clock": self._try("nvmlDeviceGetClockInfo", self.nv.NVML_CLOCK_MEM),
            "temp_c": self._try("nvmlDeviceGetTemperature", self.nv.NVML_TEMPERATURE_GPU),
            "events": reasons,
            "processes": self.compute_processes(),
        }


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def clock_figures(samples: list[dict[str, Any]], key: str) -> tuple[float | None, float | None]:
    """(mean, min) of one clock over the samples, MHz: a mean alone hides a dip."""
    values = [s[key] for s in samples if s.get(key) is not None]
    return (_mean(values), min(values)) if values else (None, None)


def process_name(pid: int) -> str | None:
    """The command name of a pid of this namespace (None for a pid NVML names from outside a
    container: its /proc entry is not ours to read)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def other_gpu_processes(samples: list[dict[str, Any]], own_pid: int) -> dict[str, Any] | None:
    """Compute processes on the device other than this worker over the window: the share of
    samples that saw one, and each one's pid, name and largest memory. Inside a container NVML
    lists the host's pids, so the worker's own is not found among them: then one listed
    process is taken to be the worker and only those beyond it count. None when NVML could not
    list processes."""
    listed = [s["processes"] for s in samples if s.get("processes") is not None]
    if not listed:
        return None
    own_listed = any(pid == own_pid for processes in listed for pid, _ in processes)
    seen: dict[int, float | None] = {}
    with_others = 0
    for processes in listed:
        rest = [(pid, mb) for pid, mb in processes if pid != own_pid]
        if len(rest) > (0 if own_listed else 1):
            with_others += 1
        for pid, mb in rest:
            known = seen.get(pid)
            seen[pid] = mb if known is None else max(known, mb or 0.0)
    if not own_listed and len(seen) <= 1:
        seen = {}                  # the one process seen is the worker itself, under a host pid
    return {"share": with_others / len(listed), "samples": len(listed),
            "own_pid_listed": own_listed,
            "processes": [{"pid": pid, "name": process_name(pid) if own_listed else None,
                           "used_mb": mb} for pid, mb in sorted(seen.items())]}


# Host CPU time by kind, from /proc/stat (through psutil): guest time is already inside user.
BUSY_CPU_FIELDS = ("user", "nice", "system", "irq", "softirq")


def host_cpu_times() -> dict[str, float] | None:
    """The whole host's CPU seconds so far: busy (every process, ours included) and steal (the
    hypervisor running other VMs); None without psutil. Inside a container /proc/stat is still
    the host's."""
    try:
        import psutil
    except ImportError:
        return None
    times = psutil.cpu_times()
    return {"busy": sum(getattr(times, f, 0.0) for f in BUSY_CPU_FIELDS),
            "steal": getattr(times, "steal", 0.0), "cpus": float(psutil.cpu_count() or 1)}


def other_cpu_load(start: dict[str, float] | None, end: dict[str, float] | None, own_cpu_s: float,
                   window_s: float) -> dict[str, Any] | None:
    """CPU time other processes used on the host during the window: the host's busy time minus
    this process's own (all its threads), as a share of the host's CPU capacity over the
    window; steal time (other VMs on the same machine) apart. None without the counters."""
    if start is None or end is None or window_s <= 0:
        return None
    capacity = window_s * end["cpus"]
    # /proc/stat counts in scheduler ticks (10 ms): a difference below zero is a rounding.
    other = max(0.0, end["busy"] - start["busy"] - own_cpu_s)
    steal = max(0.0, end["steal"] - start["steal"])
    return {"other_cpu_s": other, "share": other / capacity, "steal_share": steal / capacity,
            "cpus": int(end["cpus"]), "window_s": window_s}


class Monitor:
    """Samples the GPU in a background thread during the timed window, and measures CPU use of
    this process over the same window from its CPU-time counters (exact, no sampling).

    The counters (clock, CPU time, NVML energy) are read at the window's two ends and nowhere
    else: `__enter__` starts the sampler first and reads them last; `stop_counters` reads them
    first thing at the end of the last timed sample (the clock's on_timed_end), before the
    sampler is stopped and joined (`__exit__`), so the energy is that of the timed samples."""

    def __init__(self, interval_s: float = 0.1, gpu: Nvml | None = None,
                 compilations: Callable[[], int | None] | None = None, counted: str = ""):
        self.interval_s = interval_s
        self.gpu = gpu
        # The framework's cumulative compilation count (traces, XLA compiles, dynamo graphs),
        # read just outside the window at both ends: what compiled before it and inside it.
        self.compilations = compilations
        self.compilations_counted = counted
        self._compiled: list[int | None] = []
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._cpu0 = 0.0
        self._energy0: int | None = None
        self._host0: dict[str, float] | None = None
        self.host_other_cpu: dict[str, Any] | None = None
        self._counting = False
        self.window_s = 0.0
        self.cpu_util: float | None = None
        self.energy_j: float | None = None

    def __enter__(self) -> Monitor:
        if self.compilations is not None:
            self._compiled = [self.compilations()]
        if self.gpu is not None:
            self._thread = threading.Thread(target=self._run, args=(self.gpu,), name="gpu-monitor",
                                            daemon=True)
            self._thread.start()
            self._energy0 = self.gpu.energy_mj()
        self._host0 = host_cpu_times()
        self._cpu0 = time.process_time()  # all threads, nanosecond resolution
        self._t0 = time.perf_counter()
        self._counting = True
        return self

    def _run(self, gpu: Nvml) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(gpu.sample())

    def stop_counters(self) -> None:
        """End the window: read the clock, CPU time and energy counter now (once)."""
        if not self._counting:
            return
        self._counting = False
        self.window_s = time.perf_counter() - self._t0
        energy1 = self.gpu.energy_mj() if self.gpu is not None else None
        cpu = time.process_time() - self._cpu0
        self.host_other_cpu = other_cpu_load(self._host0, host_cpu_times(), cpu, self.window_s)
        self.cpu_util = 100.0 * cpu / self.window_s if self.window_s > 0 else None
        if self._energy0 is not None and energy1 is not None:
            self.energy_j = (energy1 - self._energy0) / 1000
        if self.compilations is not None:
            self._compiled.append(self.compilations())

    def __exit__(self, *exc: Any) -> None:
        self.stop_counters()
        if self._thread is not None and self.gpu is not None:
            self._stop.set()
            self._thread.join()
            self.samples.append(self.gpu.sample())   # a window shorter than one interval

    def summary(self) -> dict[str, Any]:
        # The window length lets the host judge the energy delta (NVML's counter is coarse).
        out: dict[str, Any] = {"cpu_util_mean": self.cpu_util, "telemetry_window_s": self.window_s,
                               "host_other_cpu": self.host_other_cpu}
        before, after = self._compiled if len(self._compiled) == 2 else (None, None)
        if before is not None and after is not None:
            out["compilations"] = {"before_timed": before, "timed": after - before,
                                   "counted": self.compilations_counted}
        if self.gpu is None:
            return out
        events: set[str] = set()
        for sample in self.samples:
            events |= clock_event_names(self.gpu.nv, sample.get("events") or 0)
        memory = [s["memory_mb"] for s in self.samples if s["memory_mb"] is not None]
        sm_mean, sm_min = clock_figures(self.samples, "sm_clock")
        mem_mean, mem_min = clock_figures(self.samples, "mem_clock")
        out.update(
            gpu_util_mean=_mean([s["util"] for s in self.samples]),
            gpu_power_mean_w=_mean([s["power_w"] for s in self.samples]),
            gpu_sm_clock_mhz=sm_mean, gpu_sm_clock_min_mhz=sm_min,
            gpu_mem_clock_mhz=mem_mean, gpu_mem_clock_min_mhz=mem_min,
            gpu_other_processes=other_gpu_processes(self.samples, os.getpid()),
            gpu_energy_j=self.energy_j,
            nvml_memory_peak_mb=max(memory) if memory else None,
            gpu_clock_events=sorted(events),
            gpu_temp_max_c=max((s["temp_c"] for s in self.samples if s["temp_c"] is not None),
                               default=None),
        )
        return out
