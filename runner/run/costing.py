"""The pipeline's steps for time and money (runner/cost/ does the arithmetic):

- price_the_run: the VM the matrix's [cost] names, priced from its table (one line), and the
  caps (--budget, [cost] budget, --max-hours); a cap that cannot work is bad input (exit 2);
- estimate_the_run: low / expected / high time (and cost) of the run before anything runs, each
  part with its source: in `plan`, --dry-run and the first screen of a run;
- start_the_meter: the manifest's cost entry, and the pace the cells keep (run/pace.py): [k/N]
  with the expected finish, each record's usd, the stop before a cap would be passed."""

from __future__ import annotations

from collections import Counter

from ..cost import estimate as estimate_mod, pricing
from ..cost.estimate import Build, Estimate, Span
from ..cost.pricing import RunPrice
from ..errors import UsageError, user_text
from ..machine import hostinfo
from ..results.formatting import usd
from . import devices, manifest as manifest_mod, profiles
from .pace import Pace, duration_text
from .state import RunState

NO_PRICE = ("needs a price: add a [cost] table to the matrix (instance = '<InstanceType>', "
            "accelerator = '<AcceleratorName>', or price_per_hour = <USD>)")


def price_the_run(state: RunState) -> None:
    """The run's price and caps, decided before anything is written."""
    matrix, opts = state.matrix, state.opts
    price = pricing.resolve(matrix.spec.cost, matrix.path)
    budget = opts.budget if opts.budget is not None else \
        (matrix.spec.cost.budget if matrix.spec.cost is not None else None)
    if budget is not None and price is None:
        raise UsageError(f"--budget {budget:g}: {NO_PRICE}")
    state.decide(price=price, budget=budget)
    if price is not None:
        state.console.print(f"[bold]cost:[/] {user_text(price.text())}", soft_wrap=True,
                            highlight=False)
        stale = price.stale()
        if stale:
            state.console.print(f"[yellow]! {user_text(stale)}[/]", soft_wrap=True,
                                highlight=False)


def device_key(cell_device: str) -> str | None:
    """The device model a cell runs on here: the GPU's, or the CPU's for a CPU cell."""
    facts = hostinfo.gpu_facts()
    if facts.get("gpu_name") and cell_device != "cpu":
        return facts["gpu_name"]
    return hostinfo.base_metadata().get("cpu_model")


def estimate_the_run(state: RunState) -> None:
    from ..history.times import past_cells
    from ..environments import venvs
    from ..machine.peak_cache import PeakCache
    from .cells import source_identity
    from .places import results_folder
    from .recording import history_destination
    from .preparing import packages_of

    setup, plan = state.setup, state.plan
    models = {d: device_key(d) for d in {c.axes.device for c in plan.cells}}
    past = past_cells(history_destination(state)[0])
    builds = [Build(s.label, setup.executor_for(s).is_ready(s), packages_of(setup, s))
              for s in state.sources]
    cache = PeakCache(results_folder(state))
    calibrations = []
    for cell in state.calibrations:
        lock = source_identity(setup, setup.source_of(cell))
        cached = not state.opts.recalibrate and cache.get(lock, cell.id) is not None
        calibrations.append((cached, cache.last_wall_s(cell.id)))
    found = estimate_mod.estimate(
        plan.to_run, lambda cell: models[cell.axes.device], past,
        lambda name: state.matrix.spec.workload(name).family, builds, venvs.build_logs(),
        calibrations, lanes=len(setup.lanes()[0]), gpu=setup.gpu,
        width=lambda cell: len(setup.lanes()[0]) if setup.alone(cell)
        else devices.width(setup, cell),
        profiles=[profiles.profile_entry(c) for c in profiles.planned(state)])
    state.decide(estimate=found)
    for line in estimate_lines(found, state.decisions.price, state.decisions.budget,
                               state.opts.max_hours):
        state.console.print(line, soft_wrap=True, highlight=False)


def span_text(span: Span) -> str:
    return (f"{duration_text(span.expected)} ({duration_text(span.low)}–"
            f"{duration_text(span.high)})")


def usd_text(span: Span, price: RunPrice) -> str:
    low, mid, high = (price.vm_usd_for(s) for s in (span.low, span.expected, span.high))
    return f"{usd(mid)} ({usd(low)}–{usd(high)})"


def sources_text(counts: Counter) -> str:
    return ", ".join(f"{n} {estimate_mod.SHORT.get(s, s)}" for s, n in counts.most_common())



def estimate_lines(found: Estimate, price: RunPrice | None, budget: float | None,
                   max_hours: float | None) -> list[str]:
    """One line: the total (and its cost), each part with where its figures came from in
    brackets, and the caps."""
    cost = f", {usd_text(found.total, price)}" if price is not None else ""
    lanes = f" on {found.lanes} lanes" if found.lanes > 1 else ""
    parts = [f"{len(found.entries)} runs{lanes} {duration_text(found.cells.expected)} "
             f"[{sources_text(found.sources['cells']) or 'none'}]"]
    for part, span in (("builds", found.builds), ("calibration", found.calibration),
                       ("profiles", found.profiles)):
        if found.sources[part] and (span.high > 0 or part != "builds"):
            parts.append(f"{part} {duration_text(span.expected)} "
                         f"[{sources_text(found.sources[part])}]")
    caps = [f"budget {usd(budget)}"] if budget is not None else []
    caps += [f"at most {max_hours:g} h"] if max_hours is not None else []
    return [f"[bold]estimate:[/] {span_text(found.total)}{cost} = {' + '.join(parts)}"
            + (f"; stops before passing the {' and '.join(caps)}" if caps else "")]


def start_the_meter(state: RunState) -> None:
    """The manifest's cost entry (price, estimate, caps; a resumed run's spending carried) and
    the pace its cells keep."""
    decided, manifest = state.decisions, state.progress.manifest
    manifest_mod.add_cost(manifest, decided.price.entry() if decided.price else None,
                          decided.estimate.entry() if decided.estimate else None,
                          decided.budget, state.opts.max_hours)
    cost = manifest.get("cost") or {}

    def raise_cap(by: str, wanted: float) -> None:
        """The continue command carries a cap that covers the rest of the estimate."""
        if by == "budget":
            state.opts.budget = wanted
        else:
            state.opts.max_hours = wanted

    state.progress.pace = Pace(
        state.plan.to_run, decided.estimate, decided.price, manifest,
        done_before=len(state.plan.done), budget=decided.budget,
        max_hours=state.opts.max_hours, carried_s=float(cost.get("spent_s") or 0.0),
        on_stop=raise_cap)
    state.store.write_manifest(manifest)
