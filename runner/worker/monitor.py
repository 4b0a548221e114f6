"""Process and GPU telemetry for the worker: RSS, CPU time, and NVML counters when a GPU exists.

NVML comes from nvidia-ml-py (imported as `pynvml`), never the deprecated `pynvml` package.
Without a GPU (or without nvidia-ml-py) every GPU figure is null, never zero.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from typing import Any, Callable

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


class Nvml:
    """A thin handle on one NVML device; `open()` returns None when there is no GPU."""

    def __init__(self, pynvml: Any, handle: Any):
        self.nv = pynvml
        self.handle = handle

    @classmethod
    def open(cls) -> "Nvml | None":
        """The device this process computes on: NVML ignores CUDA_VISIBLE_DEVICES, so its first
        entry (an index or a UUID) picks the handle."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
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
            "temp_c": self._try("nvmlDeviceGetTemperature", 0),
            "events": reasons,
        }


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


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
        self._counting = False
        self.window_s = 0.0
        self.cpu_util: float | None = None
        self.energy_j: float | None = None

    def __enter__(self) -> "Monitor":
        if self.compilations is not None:
            self._compiled = [self.compilations()]
        if self.gpu is not None:
            self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
            self._thread.start()
            self._energy0 = self.gpu.energy_mj()
        self._cpu0 = time.process_time()  # all threads, nanosecond resolution
        self._t0 = time.perf_counter()
        self._counting = True
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self.gpu.sample())

    def stop_counters(self) -> None:
        """End the window: read the clock, CPU time and energy counter now (once)."""
        if not self._counting:
            return
        self._counting = False
        self.window_s = time.perf_counter() - self._t0
        energy1 = self.gpu.energy_mj() if self.gpu is not None else None
        cpu = time.process_time() - self._cpu0
        self.cpu_util = 100.0 * cpu / self.window_s if self.window_s > 0 else None
        if self._energy0 is not None and energy1 is not None:
            self.energy_j = (energy1 - self._energy0) / 1000
        if self.compilations is not None:
            self._compiled.append(self.compilations())

    def __exit__(self, *exc: Any) -> None:
        self.stop_counters()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.samples.append(self.gpu.sample())   # a window shorter than one interval

    def summary(self) -> dict[str, Any]:
        # The window length lets the host judge the energy delta (NVML's counter is coarse).
        out: dict[str, Any] = {"cpu_util_mean": self.cpu_util, "telemetry_window_s": self.window_s}
        if len(self._compiled) == 2 and None not in self._compiled:
            before, after = self._compiled
            out["compilations"] = {"before_timed": before, "timed": after - before,
                                   "counted": self.compilations_counted}
        if self.gpu is None:
            return out
        events: set[str] = set()
        for sample in self.samples:
            events |= clock_event_names(self.gpu.nv, sample.get("events") or 0)
        memory = [s["memory_mb"] for s in self.samples if s["memory_mb"] is not None]
        out.update(
            gpu_util_mean=_mean([s["util"] for s in self.samples]),
            gpu_power_mean_w=_mean([s["power_w"] for s in self.samples]),
            gpu_sm_clock_mhz=_mean([s["sm_clock"] for s in self.samples]),
            gpu_energy_j=self.energy_j,
            nvml_memory_peak_mb=max(memory) if memory else None,
            gpu_clock_events=sorted(events),
            gpu_temp_max_c=max((s["temp_c"] for s in self.samples if s["temp_c"] is not None),
                               default=None),
        )
        return out
