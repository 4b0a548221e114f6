"""The estimate before a run: from the history of the same cell on the same device, else a like
cell (same workload, task, size and API) here, else one elsewhere scaled by the two devices'
ratio (or unscaled, wider), else a default per workload family; never beyond the timeout; the
builds from the build logs; the calibration from the cache. Also read from a real history
database holding the recorded fixture runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from runner import cli
from runner.cost import estimate as est
from runner.cost.estimate import PastCell
from runner.history.times import past_cells
from tests.fixtures import FIXTURE_RUNS

A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class FakeCell:
    name: str
    workload: str = "cnn"
    task: str = "fit"
    api: str = "jax"
    timeout: float = 1800.0
    axes: dict[str, Any] = field(default_factory=lambda: {"size": "full", "device": "auto"})

    @property
    def id(self) -> str:
        return "id-" + self.name


@dataclass(frozen=True)
class FakeEntry:
    cell: FakeCell
    repeat: int = 1

    @property
    def key(self) -> str:
        return f"{self.cell.id}-r{self.repeat}"


def past(name: str, wall: float, device: str = A100, workload: str = "cnn",
         api: str = "jax") -> PastCell:
    return PastCell("other-id", name, "env", workload, "fit", api, "full", 128, device, wall,
                    "2026-11-01T00:00:00Z")


def family(workload: str) -> str:
    return {"cnn": "model", "matmul": "ops", "selftest": "diagnostic"}.get(workload, "user")


def test_the_same_cell_on_the_same_device_comes_first():
    history = [past("cnn-a", 20.0), past("cnn-a", 24.0), past("cnn-a", 90.0, device=H100)]
    span, source = est.cell_span(FakeCell("cnn-a"), A100, history, family)
    assert source == est.HERE
    assert (span.low, span.expected, span.high) == pytest.approx((16.0, 22.0, 38.4))
    history += [past("cnn-a", 22.0)]
    span, _ = est.cell_span(FakeCell("cnn-a"), A100, history, family)
    assert (span.low, span.expected, span.high) == pytest.approx((16.0, 22.0, 31.2))


def test_a_like_cell_on_this_device_next():
    span, source = est.cell_span(FakeCell("cnn-b"), A100, [past("cnn-a", 20.0)], family)
    assert source == est.LIKE_HERE and span.expected == 20.0
    assert (span.low, span.high) == pytest.approx((12.0, 34.0))


def test_a_like_cell_elsewhere_is_scaled_by_the_cells_both_devices_ran():
    history = [past("cnn-a", 40.0, device=H100),
               past("matmul-x", 10.0, device=A100, workload="matmul"),
               past("matmul-x", 5.0, device=H100, workload="matmul")]
    span, source = est.cell_span(FakeCell("cnn-b"), A100, history, family)
    assert source == est.SCALED and span.expected == pytest.approx(80.0)   # A100 2× the H100
    assert (span.low, span.high) == pytest.approx((40.0, 160.0))


def test_a_like_cell_elsewhere_without_a_shared_cell_is_unscaled_and_wider():
    span, source = est.cell_span(FakeCell("cnn-b"), A100, [past("cnn-a", 40.0, device=H100)],
                                 family)
    assert source == est.UNSCALED and span.expected == 40.0
    assert (span.low, span.high) == pytest.approx((13.2, 120.0))


def test_nothing_like_it_takes_the_familys_default_capped_by_the_timeout():
    span, source = est.cell_span(FakeCell("mm", workload="matmul"), A100,
                                 [past("cnn-a", 20.0)], family)
    assert source == est.DEFAULT
    assert span.expected == est.FAMILY_DEFAULT_S["ops"]
    capped, _ = est.cell_span(FakeCell("slow", workload="cnn", timeout=40.0), A100, [], family)
    assert (capped.expected, capped.high) == (30.0, 40.0)
    tiny = FakeCell("t", workload="matmul", axes={"size": "tiny", "device": "auto"})
    assert est.cell_span(tiny, A100, [], family)[0].expected == pytest.approx(12.0 * 0.4)


def test_every_workload_family_has_a_default_of_its_own():
    """A family without one fell back to DEFAULT_S: the layer family's 3.4 s processes were
    planned at 30 s each (examples/layers.toml: "58 min" for a 12-minute run)."""
    from runner.worker.catalog.base import FAMILIES
    assert set(est.FAMILY_DEFAULT_S) == set(FAMILIES)


def test_builds_from_the_logs_per_package_else_a_default():
    assert est.build_span(est.Build("ready", True), [(60.0, 60)]) == (est.Span(), "ready")
    span, source = est.build_span(est.Build("new", False, packages=30), [(60.0, 60), (20.0, 40)])
    assert source == "build logs" and span.expected == pytest.approx(0.75 * 30)
    span, source = est.build_span(est.Build("new", False, packages=30), [])
    assert (source, span.expected) == ("default", est.BUILD_DEFAULT_S)
    assert est.build_span(est.Build("image", None), [])[1].startswith("not known")


def test_a_cached_peak_costs_nothing_and_a_known_one_what_it_took():
    assert est.calibration_span(True, 12.0, gpu=True) == (est.Span(), "cached peak")
    assert est.calibration_span(False, 12.0, gpu=True)[0].expected == 12.0
    assert est.calibration_span(False, None, gpu=False)[0].expected == \
        est.CALIBRATION_DEFAULT_S["cpu"]


def test_the_whole_run_spreads_its_cells_over_the_lanes_and_counts_its_sources():
    cells = [FakeCell("cnn-a"), FakeCell("mm", workload="matmul")]
    entries = [FakeEntry(c, r) for r in (1, 2) for c in cells]
    found = est.estimate(entries, lambda cell: A100, [past("cnn-a", 20.0)], family,
                         builds=[est.Build("b", False, 10)], logs=[(10.0, 10)],
                         calibrations=[(True, None), (False, None)], lanes=2, gpu=True)
    assert found.cells.expected == pytest.approx((20.0 + 12.0) * 2 / 2)
    assert found.builds.expected == pytest.approx(10.0)
    assert found.calibration.expected == est.CALIBRATION_DEFAULT_S["gpu"]
    assert found.total.expected == pytest.approx(32.0 + 10.0 + 40.0)
    assert dict(found.sources["cells"]) == {est.HERE: 2, est.DEFAULT: 2}
    assert found.entry()["sources"]["calibration"] == {"cached peak": 1, "default": 1}
    assert set(found.entries) == {e.key for e in entries}


def test_an_8_device_cell_holds_8_lanes_in_the_estimate():
    """Issue 59 item 2: the cells are packed as the scheduler runs them. Four 10 s cells, an
    8-device one, four more on 8 lanes: the wide cell waits for all 8 and holds them, nothing
    goes ahead of it: 30 s. Before: the sum over the lanes, (8 × 10 + 10) / 8 = 11.25 s."""
    cells = [FakeCell(f"c{i}") for i in range(4)] + [FakeCell("wide")] + \
        [FakeCell(f"d{i}") for i in range(4)]
    entries = [FakeEntry(c) for c in cells]
    past_runs = [past(c.name, 10.0) for c in cells] * 3
    found = est.estimate(entries, lambda cell: A100, past_runs, family, lanes=8, gpu=True,
                         width=lambda cell: 8 if cell.name == "wide" else 1)
    assert found.cells.expected == pytest.approx(30.0)
    assert found.widths[FakeEntry(cells[4]).key] == 8
    assert est.packed([(est.Span(1, 2, 3), 1)] * 4, lanes=2) == est.Span(2, 4, 6)
    assert est.packed([(est.Span(0, 5, 0), 1), (est.Span(0, 5, 0), 2)], lanes=1).expected == 10


def test_the_history_database_is_read_and_never_created(tmp_path):
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    assert past_cells(url) is None and not (tmp_path / "history.sqlite").exists()
    assert cli.main(["history", "import", str(FIXTURE_RUNS / "base"), "--db", url]) == 0
    found = past_cells(url)
    assert found
    cnn = [p for p in found if p.cell_name == "cnn-fit-keras-jax-b128"]
    assert cnn and cnn[0].device == A100 and cnn[0].wall_s > 0
    assert (cnn[0].workload, cnn[0].task, cnn[0].api) == ("cnn", "fit", "keras")
    span, source = est.cell_span(FakeCell("cnn-fit-keras-jax-b128", api="keras"), A100,
                                 found, family)
    assert source == est.HERE and span.expected == cnn[0].wall_s
    assert past_cells("sqlite:///" + str(tmp_path / "history.sqlite") + "x") is None
