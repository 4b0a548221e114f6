"""The GPU's state, the wait for a quiet GPU and locked clocks (runner/machine/gpustate.py), on
faked NVML hosts: NVML is a fake module object (test_monitor.FakePynvml, nvidia-ml-py's constants)
handed to `Nvml`, and gpustate.open_gpu — the one seam — returns it. Checked: another process
present, a hot GPU, a busy one, a quiet one; locked and unlocked clocks, a refusal, and the reset
on every way out. Not verified on a real GPU here (no GPU in this session)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from runner.errors import UsageError
from runner.machine import gpustate
from runner.worker.monitor import Nvml
from tests.worker.test_monitor import FakePynvml

SM, MEM = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
TDP = pynvml.NVML_CLOCK_LIMIT_ID_TDP


class FakeGpu(FakePynvml):
    """An A100 as NVML answers: scripted readings (each list read in turn, its last value kept),
    applications and maximum clocks, power limits, and locked clocks that remember the calls."""

    def __init__(self, temps=(35,), utils=(0,), process_lists=((),), refuse=None,
                 power_limit_mw=400_000, reasons=0, **kwargs):
        super().__init__(reasons=reasons, **kwargs)
        self.temps, self.utils = list(temps), list(utils)
        self.process_lists = [list(p) for p in process_lists]
        self.refuse = refuse
        self.power_limit_mw = power_limit_mw
        self.calls: list[tuple] = []

    @staticmethod
    def _next(values):
        return values.pop(0) if len(values) > 1 else values[0]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._next(self.temps)

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self._next(self.utils), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used)
                for pid, used in self._next(self.process_lists)]

    def nvmlDeviceGetApplicationsClock(self, handle, clock):
        return 1410 if clock == SM else 1593

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, clock):
        return 1410 if clock == SM else 1593

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1410 if clock == SM else 1593

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self.power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return 400_000

    def nvmlDeviceSetGpuLockedClocks(self, handle, low, high):
        if self.refuse is not None:
            raise self.refuse
        self.calls.append(("lock", handle, low, high))

    def nvmlDeviceResetGpuLockedClocks(self, handle):
        self.calls.append(("reset", handle))


@pytest.fixture
def fake_gpus(monkeypatch):
    """fake_gpus(**readings) -> the FakeGpu every gpustate.open_gpu(device_id) now returns."""
    def install(**kwargs):
        fake = FakeGpu(**kwargs)
        monkeypatch.setattr(gpustate, "open_gpu", lambda device_id=None: Nvml(fake, handle=device_id or "0"))
        return fake
    monkeypatch.setattr(gpustate, "_LOCKED", {})
    return install


class Clock:
    """A fake clock: sleeping advances it (the settle loop's timing without waiting)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def settle_on(fake, limit_s=10.0, max_temp_c=60.0):
    clock = Clock()
    nvml = Nvml(fake, handle="0")
    return gpustate.settle(lambda: gpustate.read_quiet(nvml), limit_s, max_temp_c,
                           sleep=clock.sleep, clock=clock)


# --- settle ------------------------------------------------------------------------------------

def test_a_quiet_gpu_starts_at_once():
    waited = settle_on(FakeGpu(temps=(38,), utils=(0,)))
    assert waited == {"settled": True, "waited_s": 0.0, "start_temp_c": 38, "util": 0,
                      "other_processes": 0, "max_temp_c": 60.0, "limit_s": 10.0, "why": None}


def test_a_hot_gpu_is_waited_for_until_it_cools():
    waited = settle_on(FakeGpu(temps=(72, 68, 63, 59, 55)))
    assert waited["settled"] and waited["start_temp_c"] == 59
    assert waited["waited_s"] == pytest.approx(3 * gpustate.SETTLE_POLL_S)


def test_a_gpu_that_stays_hot_says_so_when_the_wait_runs_out():
    waited = settle_on(FakeGpu(temps=(75,)), limit_s=2.0)
    assert not waited["settled"] and waited["waited_s"] == pytest.approx(2.0)
    assert waited["why"] == "75 °C > 60 °C" and waited["start_temp_c"] == 75


def test_another_process_on_the_gpu_is_waited_for():
    busy = [[(4242, 2 * 2**30)]] * 3 + [[]]
    waited = settle_on(FakeGpu(process_lists=busy, utils=(97, 97, 97, 0)))
    assert waited["settled"] and waited["waited_s"] == pytest.approx(1.5)


def test_another_process_that_stays_is_named():
    waited = settle_on(FakeGpu(process_lists=[[(1, 2**30)]], utils=(40,)), limit_s=1.0)
    assert not waited["settled"] and waited["other_processes"] == 1
    comm = Path("/proc/1/comm").read_text().strip()
    assert waited["why"] == f"1 other compute process(es) on the GPU (pid 1 {comm}); " \
                            "utilisation 40 %"


def test_settle_zero_or_no_nvml_waits_for_nothing(fake_gpus, monkeypatch):
    fake_gpus(temps=(90,))
    assert gpustate.settle_gpu("0", 0, 60.0) is None
    monkeypatch.setattr(gpustate, "open_gpu", lambda device_id=None: None)
    assert gpustate.settle_gpu("0", 30.0, 60.0) is None


# --- the state doctor --measure reports -------------------------------------------------------

def test_the_state_of_a_gpu(fake_gpus):
    fake = fake_gpus(temps=(33,), process_lists=[[(os.getpid(), 2**30)]], power_limit_mw=300_000)
    fake.power_mw = 61_000
    state = gpustate.gpu_state(gpustate.open_gpu("0"))
    assert state["name"] == "NVIDIA A100-SXM4-80GB" and state["persistence_mode"] is True
    assert state["ecc"] == {"current": True, "pending": True}
    assert state["clocks"]["sm_applications_mhz"] == 1410
    assert state["clocks"]["sm_default_applications_mhz"] == 1410
    assert state["clocks"]["mem_max_mhz"] == 1593 and state["clocks"]["held"] is False
    assert state["power"] == {"limit_w": 300.0, "default_limit_w": 400.0,
                              "limit_below_default": True, "draw_w": 61.0}
    assert state["idle"] == {"temp_c": 33, "util_percent": 0}
    assert state["other_processes"][0]["pid"] == os.getpid()


def test_held_clocks_are_read_from_the_applications_clocks_reason(fake_gpus):
    fake_gpus(reasons=pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting)
    clocks = gpustate.clock_state(gpustate.open_gpu("0"))
    assert clocks["held"] is True and clocks["events_now"] == ["applications_clocks_setting"]


# --- locked clocks -----------------------------------------------------------------------------

def test_unlocked_clocks_touch_nothing(fake_gpus):
    fake = fake_gpus()
    with gpustate.locked_clocks(False, ["0"], print) as clocks:
        assert clocks is None
    assert fake.calls == []


def test_locked_at_the_base_clock_and_reset_after(fake_gpus):
    fake = fake_gpus()
    said = []
    with gpustate.locked_clocks(True, ["0"], said.append) as clocks:
        assert fake.calls == [("lock", "0", TDP, TDP)]
        assert clocks["setting"] == "tdp" and clocks["gpus"][0]["locked"] == "tdp"
        assert gpustate.lock_metadata({"gpu_index": 0}) == {"gpu_locked_clocks": "tdp"}
    assert fake.calls[-1] == ("reset", "0")
    assert gpustate.lock_metadata({"gpu_index": 0}) == {}
    assert "clocks locked (TDP (base) clock) on GPU 0 until the run ends" in said


def test_locked_at_a_given_clock(fake_gpus):
    fake = fake_gpus()
    with gpustate.locked_clocks(1200, ["0"], print) as clocks:
        assert clocks["setting"] == 1200
    assert fake.calls == [("lock", "0", 1200, 1200), ("reset", "0")]


def test_a_clock_above_the_gpus_maximum_is_refused(fake_gpus):
    fake = fake_gpus()
    with pytest.raises(UsageError, match=r"above this GPU's maximum SM clock \(1410 MHz\)"):
        with gpustate.locked_clocks(2000, ["0"], print):
            pass
    assert fake.calls == []


@pytest.mark.parametrize("why", [KeyboardInterrupt, RuntimeError])
def test_the_clocks_are_reset_however_the_run_ends(fake_gpus, why):
    """Ctrl-C, SIGTERM and SIGHUP reach this as KeyboardInterrupt (errors.Terminated); a bug as
    any exception."""
    fake = fake_gpus()
    with pytest.raises(why):
        with gpustate.locked_clocks(True, ["0"], print):
            raise why()
    assert fake.calls == [("lock", "0", TDP, TDP), ("reset", "0")]


def test_a_refusal_is_one_line_and_leaves_nothing_locked(fake_gpus):
    fake = fake_gpus(refuse=pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION))
    with pytest.raises(UsageError) as refused:
        with gpustate.locked_clocks(True, ["0"], print):
            pytest.fail("the block must not run")
    message = str(refused.value)
    assert "\n" not in message and "Insufficient Permissions" in message
    assert "needs root" in message and "lock_clocks = false" in message
    assert fake.calls == [] and gpustate._LOCKED == {}


def test_a_second_gpus_refusal_resets_the_first(fake_gpus, monkeypatch):
    good, bad = FakeGpu(), FakeGpu(refuse=pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
    monkeypatch.setattr(gpustate, "open_gpu",
                        lambda pin=None: Nvml(good if pin == "0" else bad, handle=pin))
    with pytest.raises(UsageError, match="Not Supported"):
        with gpustate.locked_clocks(True, ["0", "1"], print):
            pass
    assert good.calls == [("lock", "0", TDP, TDP), ("reset", "0")]


def test_no_gpu_locks_nothing_and_says_so(fake_gpus):
    said = []
    with gpustate.locked_clocks(True, [], said.append) as clocks:
        assert clocks is None
    assert said == ["lock_clocks: no GPU on this host, nothing locked"]


def test_a_stopped_run_ends_the_wait_at_once(fake_gpus):
    """Ctrl-C in a parallel run sets the lanes' stop event: a lane waiting for a quiet GPU
    must not go on to start its cell."""
    import threading
    import time

    fake_gpus(temps=(90,))
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        gpustate.settle_gpu("0", 30.0, 60.0, stop=stop)
    assert time.monotonic() - started < 5
