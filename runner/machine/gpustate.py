"""The GPU's state, read from the host through NVML (nvidia-ml-py, decoded with its constants):
- what `doctor --measure` reports and the machine profile keeps: persistence mode, ECC, clocks
  (current, applications, default applications, maximum; whether something holds them), power
  limit against its default, temperature, power and utilisation at idle, other compute processes;
- the wait for a quiet GPU before every GPU cell ([run] settle, settle_temperature): no other
  compute process, utilisation about 0, temperature below the bound; the wait, the start
  temperature and, when the bound ran out, why are recorded in the cell's record;
- locked GPU clocks for a run ([run] lock_clocks): NVML's locked clocks at the GPU's TDP (base)
  clock or at a given clock, restored when the run ends by any path the runner survives.

No GPU, no driver or no nvidia-ml-py: nothing is read, nothing waits, nothing is locked.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterator

from ..errors import UsageError
from ..worker.monitor import Nvml, clock_event_names, process_name

IDLE_UTIL_PERCENT = 5          # "utilisation about 0": NVML's busy share of its last period
SETTLE_POLL_S = 0.5


def open_gpu(device_id: str | None = None) -> Nvml | None:
    """The NVML handle of one GPU (an index or UUID; None: GPU 0), or None. Tests replace this
    one function to fake a GPU host."""
    return Nvml.open(device_id if device_id is not None else "0")


def _call(nvml: Nvml, name: str, *args: Any) -> Any:
    try:
        return getattr(nvml.nv, name)(nvml.handle, *args)
    except Exception:  # unsupported on this GPU or driver: the fact is absent
        return None


# --- the state, for doctor --measure and the machine profile ---------------------------------

def clock_state(nvml: Nvml) -> dict[str, Any]:
    """SM and memory clocks, MHz: now, the applications clocks in force and their defaults, the
    maximum; the clock-event reasons active now (applications_clocks_setting: something holds
    the clocks, a lock or applications clocks)."""
    nv = nvml.nv
    out: dict[str, Any] = {}
    for kind, clock in (("sm", nv.NVML_CLOCK_SM), ("mem", nv.NVML_CLOCK_MEM)):
        out[f"{kind}_now_mhz"] = _call(nvml, "nvmlDeviceGetClockInfo", clock)
        out[f"{kind}_applications_mhz"] = _call(nvml, "nvmlDeviceGetApplicationsClock", clock)
        out[f"{kind}_default_applications_mhz"] = _call(
            nvml, "nvmlDeviceGetDefaultApplicationsClock", clock)
        out[f"{kind}_max_mhz"] = _call(nvml, "nvmlDeviceGetMaxClockInfo", clock)
    reasons = _call(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
    if reasons is None:
        reasons = _call(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    out["events_now"] = sorted(clock_event_names(nv, reasons)) if reasons is not None else None
    out["held"] = None if reasons is None else "applications_clocks_setting" in out["events_now"]
    return out


def power_state(nvml: Nvml) -> dict[str, Any]:
    def watts(value: Any) -> float | None:
        return value / 1000 if value is not None else None

    limit = watts(_call(nvml, "nvmlDeviceGetEnforcedPowerLimit"))
    default = watts(_call(nvml, "nvmlDeviceGetPowerManagementDefaultLimit"))
    return {"limit_w": limit, "default_limit_w": default,
            "limit_below_default": None if limit is None or default is None else limit < default,
            "draw_w": watts(_call(nvml, "nvmlDeviceGetPowerUsage"))}


def gpu_state(nvml: Nvml) -> dict[str, Any]:
    """Everything doctor --measure reports about one GPU (absent facts are None)."""
    persistence = _call(nvml, "nvmlDeviceGetPersistenceMode")
    ecc = _call(nvml, "nvmlDeviceGetEccMode")
    reading = read_quiet(nvml)
    name = _call(nvml, "nvmlDeviceGetName")
    return {
        "name": name.decode() if isinstance(name, bytes) else name,
        "persistence_mode": None if persistence is None else bool(persistence),
        "ecc": None if not ecc else {"current": bool(ecc[0]), "pending": bool(ecc[1])},
        "clocks": clock_state(nvml),
        "power": power_state(nvml),
        "idle": {"temp_c": reading.temp_c, "util_percent": reading.util},
        "other_processes": [{"pid": pid, "name": process_name(pid), "used_mb": mb}
                            for pid, mb in reading.processes],
    }


# --- settle: wait for a quiet GPU before a cell -----------------------------------------------

@dataclass
class Reading:
    util: int | None
    temp_c: int | None
    processes: list[tuple[int, float | None]] = field(default_factory=list)


def read_quiet(nvml: Nvml) -> Reading:
    util = _call(nvml, "nvmlDeviceGetUtilizationRates")
    return Reading(util=util.gpu if util is not None else None,
                   temp_c=_call(nvml, "nvmlDeviceGetTemperature", nvml.nv.NVML_TEMPERATURE_GPU),
                   processes=nvml.compute_processes() or [])


def not_quiet(reading: Reading, max_temp_c: float) -> list[str]:
    """Why the GPU is not quiet yet, in plain words; empty when it is. Before a cell no process
    of the run is on the GPU, so every compute process listed is another's."""
    why = []
    if reading.processes:
        shown = ", ".join(f"pid {pid}" + (f" {process_name(pid)}" if process_name(pid) else "")
                          for pid, _ in reading.processes[:3])
        why.append(f"{len(reading.processes)} other compute process(es) on the GPU ({shown})")
    if reading.util is not None and reading.util > IDLE_UTIL_PERCENT:
        why.append(f"utilisation {reading.util} %")
    if reading.temp_c is not None and reading.temp_c > max_temp_c:
        why.append(f"{reading.temp_c} °C > {max_temp_c:g} °C")
    return why


def settle(read: Callable[[], Reading], limit_s: float, max_temp_c: float,
           sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Poll until the GPU is quiet or limit_s has passed: the record's `settle`."""
    started = clock()
    while True:
        reading = read()
        why = not_quiet(reading, max_temp_c)
        waited = clock() - started
        if not why or waited >= limit_s:
            return {"settled": not why, "waited_s": round(waited, 3),
                    "start_temp_c": reading.temp_c, "util": reading.util,
                    "other_processes": len(reading.processes), "max_temp_c": max_temp_c,
                    "limit_s": limit_s, "why": "; ".join(why) or None}
        sleep(min(SETTLE_POLL_S, limit_s - waited))


def settle_gpu(device_id: str | None, limit_s: float, max_temp_c: float,
               on_status: Callable[[str], None] = lambda text: None,
               stop: threading.Event | None = None) -> dict[str, Any] | None:
    """Wait for the quiet GPU `device_id` names; None when there is nothing to wait for
    (settle = 0, no NVML). `stop` set (Ctrl-C in a parallel run) ends the wait at once, as
    KeyboardInterrupt: no cell starts after the run was stopped."""
    if limit_s <= 0:
        return None
    nvml = open_gpu(device_id)
    if nvml is None:
        return None
    on_status("waiting for a quiet GPU")

    def pause(seconds: float) -> None:
        if stop is None:
            time.sleep(seconds)
        elif stop.wait(seconds):
            raise KeyboardInterrupt

    return settle(lambda: read_quiet(nvml), limit_s, max_temp_c, sleep=pause)


# --- locked clocks for a run -------------------------------------------------------------------

# The GPUs this process locked, {device id: the setting ("tdp" or MHz)}: NVML cannot read a lock
# back, so what the runner set is known only here (the manifest and every record on such a GPU
# say it).
_LOCKED: dict[str, str | int] = {}


def lock_target(nvml: Nvml, setting: bool | int) -> tuple[int, int, str | int]:
    """(min, max, what the record says) for nvmlDeviceSetGpuLockedClocks: NVML's TDP limit id
    for true (the clock the board sustains at its rated power: its base), else the MHz given,
    which must not exceed the GPU's maximum SM clock."""
    nv = nvml.nv
    if setting is True:
        return nv.NVML_CLOCK_LIMIT_ID_TDP, nv.NVML_CLOCK_LIMIT_ID_TDP, "tdp"
    highest = _call(nvml, "nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_SM)
    if highest is not None and setting > highest:
        raise UsageError(f"run.lock_clocks = {setting}: above this GPU's maximum SM clock "
                         f"({highest} MHz)")
    return int(setting), int(setting), int(setting)


def lock_one(device_id: str, setting: bool | int) -> dict[str, Any]:
    nvml = open_gpu(device_id)
    if nvml is None:
        raise UsageError(f"run.lock_clocks: GPU {device_id}: NVML cannot open it")
    low, high, recorded = lock_target(nvml, setting)
    try:
        nvml.nv.nvmlDeviceSetGpuLockedClocks(nvml.handle, low, high)
    except Exception as exc:  # NVMLError_NoPermission, _NotSupported, _InvalidArgument, ...
        raise UsageError(f"run.lock_clocks = {str(setting).lower()}: the driver refused to lock "
                         f"GPU {device_id}'s clocks ({exc}): locking needs root (sudo nvidia-smi "
                         "-lgc works the same way), or set lock_clocks = false") from None
    _LOCKED[device_id] = recorded
    return {"gpu": device_id, "locked": recorded,
            "sm_clock_after_mhz": _call(nvml, "nvmlDeviceGetClockInfo", nvml.nv.NVML_CLOCK_SM)}


def unlock_all() -> list[str]:
    """Reset every GPU this process locked (nvmlDeviceResetGpuLockedClocks); the GPUs it could not
    reset (the run's last lines name them, with the command that does)."""
    failed = []
    for device_id in list(_LOCKED):
        nvml = open_gpu(device_id)
        if nvml is None:        # NVML cannot open it now: it stays locked, the run says so
            failed.append(device_id)
            _LOCKED.pop(device_id, None)
            continue
        try:
            nvml.nv.nvmlDeviceResetGpuLockedClocks(nvml.handle)
        except Exception:  # every other GPU is still reset
            failed.append(device_id)
        _LOCKED.pop(device_id, None)
    return failed


@contextlib.contextmanager
def locked_clocks(setting: bool | int, device_ids: list[str],
                  notify: Callable[[str], None]) -> Iterator[dict[str, Any] | None]:
    """Lock the clocks of these GPUs for the block and reset them when it ends, however it ends
    (an error, Ctrl-C, SIGTERM or SIGHUP: the runner raises those as KeyboardInterrupt). Yields
    what the manifest keeps: None when nothing is locked (setting false, or no GPU). A refusal
    raises UsageError (one line, exit 2) after resetting what was already locked."""
    if setting is False or not device_ids:
        if setting is not False:
            notify("lock_clocks: no GPU on this host, nothing locked")
        yield None
        return
    locked = []
    try:
        for device_id in device_ids:
            locked.append(lock_one(device_id, setting))
        notify(f"clocks locked ({'TDP (base) clock' if setting is True else f'{setting} MHz'}) "
               f"on GPU {', '.join(device_ids)} until the run ends")
        yield {"setting": "tdp" if setting is True else setting, "gpus": locked,
               "how": "nvmlDeviceSetGpuLockedClocks(min = max), reset at the end with "
                      "nvmlDeviceResetGpuLockedClocks"}
    finally:
        failed = unlock_all()
        if failed:
            notify(f"could not reset the locked clocks of GPU {', '.join(failed)}: run "
                   "`sudo nvidia-smi -rgc`")


def lock_metadata(placement: dict[str, Any]) -> dict[str, Any]:
    """The record's gpu_locked_clocks for a cell placed on a GPU this process locked."""
    for device_id in (placement.get("gpu_uuid"), placement.get("gpu_index")):
        if device_id is not None and str(device_id) in _LOCKED:
            return {"gpu_locked_clocks": _LOCKED[str(device_id)]}
    return {}
