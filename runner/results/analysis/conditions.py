"""What the machine was doing while a cell ran, as warnings in plain words, grouped by kind:

- throttle: the GPU slowed its clocks for power or heat during a timed window;
- other load: another process computed on the cell's GPU, or other processes used more than a
  small share of the host's CPU time (or the hypervisor gave it to other VMs: steal);
- clocks: the SM or memory clock's mean differed across the cell's repeats by more than this
  machine's run-to-run spread (from its machine profile; 5 % without one);
- settle: a repeat started before the GPU was quiet (another process, busy, or hot) when the
  wait of [run] settle ran out;
- compilations: the framework compiled (or traced) inside the timed window, so some samples
  hold compile time, not steps (the worker counts them: torch dynamo graphs, JAX XLA compiles,
  TensorFlow traces; record field `compilations`).

Read from the records' telemetry (runner/worker/monitor.py) and the host's settle wait; the
statistics' own warnings (CV, short windows, repeats that disagree) stay in stats.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...worker.monitor import SLOWDOWN_EVENTS
from ..data.types import Record
from ..formatting import fmt

KINDS = ("throttle", "other load", "clocks", "settle", "compilations")
TITLES = {
    "statistics": "The numbers themselves",
    "throttle": "The GPU throttled (slowed its clocks for power or heat)",
    "other load": "Something else was running",
    "clocks": "Clocks differed between repeats",
    "settle": "The GPU was not quiet when a repeat started",
    "compilations": "The framework compiled inside the timed window",
}


@dataclass(frozen=True)
class Kind:
    """One kind of warning: the group (warning_groups' key) its text is in, what its text holds
    (the first kind of its group, in this order, whose `mark` the text contains), what one line
    says of all the cells that have it, and whether each cell gets a line of its own: only for
    what a user must act on (a figure that mixes two setups, a compilation inside the timed
    window, another process on the GPU). The rest is the machine being itself (a shared CPU,
    sub-millisecond steps, boost clocks): one line per kind, naming the cells."""
    group: str
    mark: str
    says: str
    act: bool = False


WARNING_KINDS = (
    Kind("statistics", "different setups", "repeats ran on different setups", act=True),
    # Outliers are the machine's on a shared CPU (dozens in a sub-millisecond cell); a
    # compilation inside the window, which they may also be, is counted apart (compilations).
    Kind("statistics", "timed sample(s) above", "timed samples above 10× the median (a stall, "
         "or a recompilation)"),
    # A block chosen by a disturbed calibration and handed to every repeat: re-run the cell.
    Kind("statistics", "too short: median sample", "a block of calls too short for its target "
         "(a disturbed calibration)", act=True),
    Kind("statistics", "CV ", "a step-to-step CV above the limit"),
    Kind("statistics", "timed window ", "a timed window under 1 s"),
    Kind("statistics", "energy window ", "an energy window under 1 s (NVML's counter is "
         "coarser)"),
    Kind("statistics", "repeats disagree", "repeats that disagree (Kruskal-Wallis)"),
    Kind("statistics", "", "other caution about the numbers"),
    Kind("compilations", "", "compilations inside the timed window", act=True),
    Kind("other load", "another process was on the GPU", "another process on the GPU",
         act=True),
    Kind("other load", "other processes used", "other processes using the host's CPU"),
    Kind("other load", "", "CPU time given to other VMs (steal)"),
    Kind("throttle", "", "the GPU slowing its clocks (power or heat)"),
    Kind("clocks", "", "clocks that differed between repeats"),
    Kind("settle", "", "a repeat started on a GPU that was not quiet"),
)


def kind_of(group: str, text: str) -> Kind:
    return next((k for k in WARNING_KINDS if k.group == group and k.mark in text),
                Kind(group, "", group))


def to_act_on(summary: Mapping[str, Any]) -> bool:
    """Whether a cell has a warning its user must act on (the terminal marks it)."""
    return any(kind_of(group, text).act
               for group, texts in (summary.get("warning_groups") or {}).items()
               for text in texts)


OTHER_LOAD_SHARE = 0.05     # other processes' share of the host's CPU time (or steal) to warn
DEFAULT_CLOCK_SPREAD = 0.05  # without a machine profile
MIN_CLOCK_SPREAD = 0.01     # clocks move in steps of ~15 MHz: never flag less than 1 %


def _repeats(records: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"r{r.get('repeat')}" for r in records)


def throttle(ok: Sequence[Mapping[str, Any]]) -> list[str]:
    by_event: dict[str, list[Mapping[str, Any]]] = {}
    for record in ok:
        for event in sorted(set(record.get("gpu_clock_events") or []) & SLOWDOWN_EVENTS):
            by_event.setdefault(event, []).append(record)
    return [f"GPU clock slowdown: {event} in {_repeats(records)}"
            for event, records in by_event.items()]


def other_gpu_load(ok: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for record in ok:
        seen = record.get("gpu_other_processes") or {}
        if not seen.get("share"):
            continue
        shown = ", ".join(f"pid {p['pid']}" + (f" {p['name']}" if p.get("name") else "")
                          + (f" {fmt(p['used_mb'])} MB" if p.get("used_mb") is not None else "")
                          for p in (seen.get("processes") or [])[:3])
        out.append(f"another process was on the GPU during {seen['share'] * 100:.0f} % of "
                   f"r{record.get('repeat')}'s timed window ({shown})")
    return out


def other_cpu_load(ok: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for record in ok:
        load = record.get("host_other_cpu") or {}
        if (load.get("share") or 0) > OTHER_LOAD_SHARE:
            cores = load["other_cpu_s"] / load["window_s"] if load.get("window_s") else None
            out.append(f"other processes used {load['share'] * 100:.0f} % of the host's CPU "
                       f"time during r{record.get('repeat')}'s timed window"
                       + (f" ({fmt(cores)} of {load.get('cpus')} CPUs)" if cores else "")
                       + threads_note(record, load.get("cpus")))
        if (load.get("steal_share") or 0) > OTHER_LOAD_SHARE:
            out.append(f"the hypervisor gave {load['steal_share'] * 100:.0f} % of the host's "
                       f"CPU time to other VMs (steal) during r{record.get('repeat')}")
    return out


def threads_note(record: Mapping[str, Any], cpus: Any) -> str:
    """Why such load hurts a CPU cell whose framework runs as many threads as the host has CPUs:
    its multi-threaded kernels wait at every barrier for the thread another process displaced
    (a 256² float32 torch matmul on a shared 2-core VM, 2026-11-27: 0.35 ms a step with one
    thread, 1.9–22 ms with two; docs/noise.md)."""
    threads = (record.get("metadata") or {}).get("torch_num_threads")
    on_cpu = "cpu" in str((record.get("effective") or {}).get("device") or "cpu").lower()
    if not on_cpu or not isinstance(threads, int) or not isinstance(cpus, int) \
            or threads < cpus:
        return ""
    return (f"; the cell ran {threads} threads on {cpus} CPUs, so each kernel waited for the "
            "thread another process displaced: its figure may be many times its quiet one "
            "(compare it only beside cells timed at the same moment, or set OMP_NUM_THREADS)")


def clock_spread(ok: Sequence[Mapping[str, Any]], spread: float | None) -> list[str]:
    """The SM and memory clocks' means across repeats, against the machine's spread."""
    allowed = max(MIN_CLOCK_SPREAD, spread if spread is not None else DEFAULT_CLOCK_SPREAD)
    source = "this machine's run-to-run spread" if spread is not None else \
        "no machine profile, so 5 %"
    out = []
    for name, key, low_key in (("SM", "gpu_sm_clock_mhz", "gpu_sm_clock_min_mhz"),
                               ("memory", "gpu_mem_clock_mhz", "gpu_mem_clock_min_mhz")):
        means = [r[key] for r in ok if r.get(key)]
        if len(means) < 2 or max(means) / min(means) - 1 <= allowed:
            continue
        lowest = min((r[low_key] for r in ok if r.get(low_key)), default=None)
        out.append(f"{name} clock means {fmt(min(means))}–{fmt(max(means))} MHz across repeats "
                   f"({(max(means) / min(means) - 1) * 100:.1f} % apart; {source} "
                   f"{allowed * 100:.1f} %)" + (f", lowest sample {fmt(lowest)} MHz"
                                                 if lowest is not None else ""))
    return out


def settle(records: list[Record]) -> list[str]:
    out = []
    for record in records:
        waited = record.get("settle") or {}
        if waited and not waited.get("settled"):
            out.append(f"r{record.get('repeat')} started after waiting {fmt(waited['waited_s'])} s "
                       f"for a quiet GPU: {waited.get('why')}"
                       + (f" (at {waited['start_temp_c']} °C)"
                          if waited.get("start_temp_c") is not None else ""))
    return out


def compilations(ok: Sequence[Mapping[str, Any]]) -> list[str]:
    """Compilations counted between the timed window's first and last sample."""
    out = []
    for record in ok:
        counts = record.get("compilations") or {}
        if counts.get("timed"):
            out.append(f"r{record.get('repeat')}: {counts['timed']} compilation(s) inside the "
                       f"timed window ({counts.get('counted') or 'counted by the framework'}); "
                       "the samples that hold them are slower than a step")
    return out


def warnings_by_kind(records: list[Record],
                     spread: float | None = None) -> dict[str, list[str]]:
    """{kind: warnings} of one cell's records (only the kinds that have some)."""
    ok = [r for r in records if r.get("status") == "ok"]
    found = {"throttle": throttle(ok),
             "other load": other_gpu_load(ok) + other_cpu_load(ok),
             "clocks": clock_spread(ok, spread),
             "settle": settle(records),
             "compilations": compilations(ok)}
    return {kind: texts for kind, texts in found.items() if texts}
